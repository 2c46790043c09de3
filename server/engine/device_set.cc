#include "engine/device_set.h"

#include <limits>
#include <stdexcept>

namespace gpuscan::engine {
namespace {

// Lowers its device's open count when the session ends.
class OpenSession {
 public:
  explicit OpenSession(std::atomic<uint64_t>& open) : open_(open) {}
  ~OpenSession() { open_.fetch_sub(1); }
  OpenSession(const OpenSession&) = delete;
  OpenSession& operator=(const OpenSession&) = delete;

 private:
  std::atomic<uint64_t>& open_;
};

class SetScan final : public ScanSession {
 public:
  SetScan(std::unique_ptr<ScanSession> s, std::string device, std::atomic<uint64_t>& open)
      : s_(std::move(s)), device_(std::move(device)), open_(open) {}
  void Process(const void* in, void* out, uint64_t n, StageTimes& t) override { s_->Process(in, out, n, t); }
  std::string algorithm() const override { return s_->algorithm(); }
  bool in_place() const override { return s_->in_place(); }
  uint64_t Begin(const void* in, void* out, uint64_t n, StageTimes& t) override { return s_->Begin(in, out, n, t); }
  void End(uint64_t ticket, StageTimes& t) override { s_->End(ticket, t); }
  uint64_t overlap_elements() const override { return s_->overlap_elements(); }
  bool on_host(uint64_t n) const override { return s_->on_host(n); }
  std::string device() const override { return device_; }

 private:
  std::unique_ptr<ScanSession> s_;
  std::string device_;
  OpenSession open_;
};

class SetReduce final : public ReduceSession {
 public:
  SetReduce(std::unique_ptr<ReduceSession> s, std::string device, std::atomic<uint64_t>& open)
      : s_(std::move(s)), device_(std::move(device)), open_(open) {}
  void Process(const void* in, uint64_t n, StageTimes& t) override { s_->Process(in, n, t); }
  void Result(void* value) const override { s_->Result(value); }
  std::string algorithm() const override { return s_->algorithm(); }
  std::string device() const override { return device_; }

 private:
  std::unique_ptr<ReduceSession> s_;
  std::string device_;
  OpenSession open_;
};

class SetCompact final : public CompactSession {
 public:
  SetCompact(std::unique_ptr<CompactSession> s, std::string device, std::atomic<uint64_t>& open)
      : s_(std::move(s)), device_(std::move(device)), open_(open) {}
  uint64_t Process(const void* values, const uint8_t* flags, uint64_t n, void* out_values, int64_t* out_indices,
                   StageTimes& t) override {
    return s_->Process(values, flags, n, out_values, out_indices, t);
  }
  std::string algorithm() const override { return s_->algorithm(); }
  std::string device() const override { return device_; }

 private:
  std::unique_ptr<CompactSession> s_;
  std::string device_;
  OpenSession open_;
};

class SetHistogram final : public HistogramSession {
 public:
  SetHistogram(std::unique_ptr<HistogramSession> s, std::string device, std::atomic<uint64_t>& open)
      : s_(std::move(s)), device_(std::move(device)), open_(open) {}
  void Process(const void* in, uint64_t n, StageTimes& t) override { s_->Process(in, n, t); }
  std::vector<uint64_t> Result() const override { return s_->Result(); }
  std::string algorithm() const override { return s_->algorithm(); }
  std::string device() const override { return device_; }

 private:
  std::unique_ptr<HistogramSession> s_;
  std::string device_;
  OpenSession open_;
};

class SetSegmentedScan final : public SegmentedScanSession {
 public:
  SetSegmentedScan(std::unique_ptr<SegmentedScanSession> s, std::string device, std::atomic<uint64_t>& open)
      : s_(std::move(s)), device_(std::move(device)), open_(open) {}
  void Process(const void* values, const void* keys, void* out, uint64_t n, StageTimes& t) override {
    s_->Process(values, keys, out, n, t);
  }
  std::string algorithm() const override { return s_->algorithm(); }
  std::string device() const override { return device_; }

 private:
  std::unique_ptr<SegmentedScanSession> s_;
  std::string device_;
  OpenSession open_;
};

class SetScan2D final : public Scan2DSession {
 public:
  SetScan2D(std::unique_ptr<Scan2DSession> s, std::string device, std::atomic<uint64_t>& open)
      : s_(std::move(s)), device_(std::move(device)), open_(open) {}
  void Process(const void* in, void* out, uint64_t rows, StageTimes& t) override { s_->Process(in, out, rows, t); }
  std::string algorithm() const override { return s_->algorithm(); }
  std::string device() const override { return device_; }

 private:
  std::unique_ptr<Scan2DSession> s_;
  std::string device_;
  OpenSession open_;
};

class SetReduceByKey final : public ReduceByKeySession {
 public:
  SetReduceByKey(std::unique_ptr<ReduceByKeySession> s, std::string device, std::atomic<uint64_t>& open)
      : s_(std::move(s)), device_(std::move(device)), open_(open) {}
  uint64_t Process(const void* values, const void* keys, uint64_t n, std::string* keys_out, std::string* values_out,
                   StageTimes& t) override {
    return s_->Process(values, keys, n, keys_out, values_out, t);
  }
  uint64_t Finish(std::string* keys_out, std::string* values_out) override { return s_->Finish(keys_out, values_out); }
  std::string algorithm() const override { return s_->algorithm(); }
  std::string device() const override { return device_; }

 private:
  std::unique_ptr<ReduceByKeySession> s_;
  std::string device_;
  OpenSession open_;
};

}  // namespace

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

// Each New* raises the chosen device's count first and hands it to the session, which lowers
// it; if the engine throws, the count is lowered here.
template <class Session, class Wrapper, class Make>
std::unique_ptr<Session> Open(std::atomic<uint64_t>& open, const std::string& label, Make&& make) {
  std::unique_ptr<Session> s;
  try {
    s = make();
  } catch (...) {
    open.fetch_sub(1);
    throw;
  }
  return std::make_unique<Wrapper>(std::move(s), label, open);
}

std::unique_ptr<ScanSession> DeviceSet::NewScan(const ScanSpec& spec) {
  const size_t i = Pick();
  return Open<ScanSession, SetScan>(open_[i], labels_[i], [&] { return devices_[i]->NewScan(spec); });
}

std::unique_ptr<ReduceSession> DeviceSet::NewReduce(const ReduceSpec& spec) {
  const size_t i = Pick();
  return Open<ReduceSession, SetReduce>(open_[i], labels_[i], [&] { return devices_[i]->NewReduce(spec); });
}

std::unique_ptr<CompactSession> DeviceSet::NewCompact(const CompactSpec& spec) {
  const size_t i = Pick();
  return Open<CompactSession, SetCompact>(open_[i], labels_[i], [&] { return devices_[i]->NewCompact(spec); });
}

std::unique_ptr<SegmentedScanSession> DeviceSet::NewSegmentedScan(const SegmentedScanSpec& spec) {
  const size_t i = Pick();
  return Open<SegmentedScanSession, SetSegmentedScan>(open_[i], labels_[i],
                                                      [&] { return devices_[i]->NewSegmentedScan(spec); });
}

std::unique_ptr<ReduceByKeySession> DeviceSet::NewReduceByKey(const SegmentedScanSpec& spec) {
  const size_t i = Pick();
  return Open<ReduceByKeySession, SetReduceByKey>(open_[i], labels_[i],
                                                  [&] { return devices_[i]->NewReduceByKey(spec); });
}

std::unique_ptr<Scan2DSession> DeviceSet::NewScan2D(const Scan2DSpec& spec) {
  const size_t i = Pick();
  return Open<Scan2DSession, SetScan2D>(open_[i], labels_[i], [&] { return devices_[i]->NewScan2D(spec); });
}

// A sort is one call, not a session: the device's count is held for its duration.
std::string DeviceSet::Sort(const SortSpec& spec, const void* keys, const void* values, uint64_t n, void* keys_out,
                            void* values_out, int64_t* indices_out, StageTimes& times) {
  const size_t i = Pick();
  OpenSession held(open_[i]);
  return devices_[i]->Sort(spec, keys, values, n, keys_out, values_out, indices_out, times);
}

std::unique_ptr<HistogramSession> DeviceSet::NewHistogram(const HistogramSpec& spec) {
  const size_t i = Pick();
  return Open<HistogramSession, SetHistogram>(open_[i], labels_[i],
                                              [&] { return devices_[i]->NewHistogram(spec); });
}

}  // namespace gpuscan::engine
