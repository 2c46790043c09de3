#include "engine/device_set.h"

#include <limits>
#include <stdexcept>

namespace gpuscan::engine {

DeviceSet::DeviceSet(std::vector<std::unique_ptr<Engine>> devices, std::vector<std::string> labels)
    : devices_(std::move(devices)), labels_(std::move(labels)),
      open_(std::make_unique<std::atomic<uint64_t>[]>(devices_.size())) {
  if (devices_.empty() || labels_.size() != devices_.size()) {
    throw std::invalid_argument("DeviceSet: one label per device, at least one device");
  }
}

namespace {

// One handle for a range known to several devices: the adoptions go before the registration.
struct Registration {
  std::shared_ptr<void> first;                 // declared first: released last
  std::vector<std::shared_ptr<void>> adopted;
};

}  // namespace

std::shared_ptr<void> DeviceSet::RegisterHost(void* data, uint64_t bytes, bool read_only) {
  auto r = std::make_shared<Registration>();
  r->first = devices_[0]->RegisterHost(data, bytes, read_only);
  if (!r->first) return nullptr;  // not registered: every device stages it
  for (size_t i = 1; i < devices_.size(); ++i) {
    if (auto h = devices_[i]->AdoptRegistered(data, bytes)) r->adopted.push_back(std::move(h));
  }
  return std::shared_ptr<void>(r, data);
}

std::shared_ptr<void> DeviceSet::AdoptRegistered(void* data, uint64_t bytes) {
  auto r = std::make_shared<Registration>();
  for (auto& d : devices_) {
    if (auto h = d->AdoptRegistered(data, bytes)) r->adopted.push_back(std::move(h));
  }
  return r->adopted.empty() ? nullptr : std::shared_ptr<void>(r, data);
}

bool DeviceSet::registered(const void* p, uint64_t bytes) const {
  for (const auto& d : devices_) {
    if (!d->registered(p, bytes)) return false;
  }
  return true;
}

std::shared_ptr<IpcMemory> DeviceSet::OpenIpc(const std::string& device_uuid, const std::string& handle) {
  for (size_t i = 0; i < devices_.size(); ++i) {
    const auto infos = devices_[i]->devices();
    if (infos.empty() || infos[0].uuid != device_uuid) continue;
    auto mem = devices_[i]->OpenIpc(device_uuid, handle);
    mem->device = labels_[i];
    return mem;
  }
  throw Error(ErrorCode::kFailedPrecondition, "the device is none of this server's " + device_name());
}

std::unique_ptr<ResidentMemory> DeviceSet::AllocateResident(uint64_t bytes) {
  size_t best = 0;
  uint64_t best_free = 0;
  for (size_t i = 0; i < devices_.size(); ++i) {
    const auto m = devices_[i]->device_memory();
    const uint64_t free = m ? m->total_bytes - m->used_bytes : 0;
    if (i == 0 || free > best_free) {
      best = i;
      best_free = free;
    }
  }
  auto mem = devices_[best]->AllocateResident(bytes);
  mem->device = labels_[best];
  return mem;
}

std::unique_ptr<ResidentMemory> DeviceSet::AllocateSpill(uint64_t bytes) { return devices_[0]->AllocateSpill(bytes); }

std::string DeviceSet::device_name() const {
  std::string s = std::to_string(devices_.size()) + " devices: ";
  for (size_t i = 0; i < labels_.size(); ++i) s += (i ? ", " : "") + labels_[i];
  return s;
}

std::vector<DeviceInfo> DeviceSet::devices() const {
  std::vector<DeviceInfo> all;
  for (const auto& d : devices_) {
    for (DeviceInfo& info : d->devices()) all.push_back(std::move(info));
  }
  return all;
}

bool DeviceSet::healthy() const {
  for (const auto& d : devices_) {
    if (d->healthy()) return true;
  }
  return false;
}

std::string DeviceSet::unhealthy_reason() const {
  std::string why;
  for (size_t i = 0; i < devices_.size(); ++i) {
    if (!devices_[i]->healthy()) why += (why.empty() ? "" : "; ") + labels_[i] + ": " + devices_[i]->unhealthy_reason();
  }
  return why;
}

void DeviceSet::CheckHealth() {
  for (auto& d : devices_) d->CheckHealth();
}

std::optional<DeviceMemory> DeviceSet::device_memory() const {
  std::optional<DeviceMemory> sum;
  for (const auto& d : devices_) {
    const std::optional<DeviceMemory> m = d->device_memory();
    if (!m) continue;
    if (!sum) sum = DeviceMemory{};
    sum->used_bytes += m->used_bytes;
    sum->total_bytes += m->total_bytes;
    if (m->pool_reserved_bytes) sum->pool_reserved_bytes = sum->pool_reserved_bytes.value_or(0) + *m->pool_reserved_bytes;
  }
  return sum;
}

std::vector<DeviceStatus> DeviceSet::device_status() const {
  std::vector<DeviceStatus> out;
  for (size_t i = 0; i < devices_.size(); ++i) {
    out.push_back(DeviceStatus{labels_[i], devices_[i]->healthy(), devices_[i]->unhealthy_reason(), open_[i].load(),
                               devices_[i]->device_memory()});
  }
  return out;
}

size_t DeviceSet::Pick() {
  const size_t n = devices_.size();
  const size_t start = next_.fetch_add(1) % n;
  size_t best = n;
  uint64_t best_open = std::numeric_limits<uint64_t>::max();
  for (size_t k = 0; k < n; ++k) {
    const size_t i = (start + k) % n;
    if (!devices_[i]->healthy()) continue;
    const uint64_t open = open_[i].load();
    if (open < best_open) best = i, best_open = open;
  }
  if (best == n) best = start;  // none healthy: that device's engine refuses the call with its reason
  open_[best].fetch_add(1);
  return best;
}

// Every session comes from the device Pick chose, whose open count Pick raised: the session
// names its device and holds the count until it ends (or, if the engine throws, the hold
// lowers it at once).
template <class Make>
auto DeviceSet::Open(Make&& make) {
  const size_t i = Pick();
  std::shared_ptr<void> hold(static_cast<void*>(&open_[i]),
                             [](void* open) { static_cast<std::atomic<uint64_t>*>(open)->fetch_sub(1); });
  auto session = make(*devices_[i]);
  session->Place(labels_[i], std::move(hold));
  return session;
}

std::unique_ptr<ScanSession> DeviceSet::NewScan(const ScanSpec& spec) {
  return Open([&](Engine& e) { return e.NewScan(spec); });
}

std::unique_ptr<ReduceSession> DeviceSet::NewReduce(const ReduceSpec& spec) {
  return Open([&](Engine& e) { return e.NewReduce(spec); });
}

std::unique_ptr<CompactSession> DeviceSet::NewCompact(const CompactSpec& spec) {
  return Open([&](Engine& e) { return e.NewCompact(spec); });
}

std::unique_ptr<HistogramSession> DeviceSet::NewHistogram(const HistogramSpec& spec) {
  return Open([&](Engine& e) { return e.NewHistogram(spec); });
}

std::unique_ptr<SegmentedScanSession> DeviceSet::NewSegmentedScan(const SegmentedScanSpec& spec) {
  return Open([&](Engine& e) { return e.NewSegmentedScan(spec); });
}

std::unique_ptr<ReduceByKeySession> DeviceSet::NewReduceByKey(const SegmentedScanSpec& spec) {
  return Open([&](Engine& e) { return e.NewReduceByKey(spec); });
}

std::unique_ptr<Scan2DSession> DeviceSet::NewScan2D(const Scan2DSpec& spec) {
  return Open([&](Engine& e) { return e.NewScan2D(spec); });
}

std::unique_ptr<SortSession> DeviceSet::NewSort(const SortSpec& spec) {
  return Open([&](Engine& e) { return e.NewSort(spec); });
}

}  // namespace gpuscan::engine
