#include "service/device_memory.h"

#include <algorithm>
#include <exception>
#include <tuple>
#include <utility>
#include <vector>

#include "service/status.h"

namespace gpuscan::server {
namespace {

const std::string kDevicePrefix = "header.device_memory.";
constexpr size_t kHandleBytes = 64;  // sizeof(cudaIpcMemHandle_t)
constexpr size_t kUuidBytes = 16;    // sizeof(cudaUUID_t)


NamedRange Handle(const std::string& handle, uint64_t offset) {
  return {!handle.empty(), "(" + std::to_string(handle.size()) + " bytes)", offset};
}

// [offset, offset + bytes) of the allocation behind `handle`, checked to lie inside it.
grpc::Status OpenRange(IpcHandles& handles, const std::string& uuid, const std::string& field,
                       const std::string& handle, uint64_t offset, uint64_t bytes,
                       std::shared_ptr<engine::IpcMemory>* memory, std::byte** at) {
  const std::string offset_field = field == "handle" ? "offset" : field.substr(0, field.size() - 6) + "offset";
  if (auto s = handles.Open(kDevicePrefix + field, uuid, handle, memory); !s.ok()) return s;
  const uint64_t size = (*memory)->bytes;
  if (offset > size || bytes > size - offset) {
    return {grpc::StatusCode::OUT_OF_RANGE, kDevicePrefix + offset_field + " " + std::to_string(offset) + " + " +
                                                std::to_string(bytes) + " bytes is beyond the " + std::to_string(size) +
                                                "-byte allocation of " + kDevicePrefix + field};
  }
  *at = static_cast<std::byte*>((*memory)->base) + offset;
  return grpc::Status::OK;
}

struct Span {
  const std::byte* at;
  uint64_t bytes;
  const char* field;
};

grpc::Status Disjoint(const Span& a, const Span& b) {
  if (a.bytes == 0 || b.bytes == 0 || a.at + a.bytes <= b.at || b.at + b.bytes <= a.at) return grpc::Status::OK;
  return InvalidArgument(kDevicePrefix + a.field + " overlaps " + kDevicePrefix + b.field + ": output ranges may not overlap other ranges");
}

}  // namespace

IpcHandles::IpcHandles(engine::Engine* engine, bool enabled, std::chrono::milliseconds idle)
    : engine_(engine), enabled_(enabled && engine != nullptr), idle_(idle) {
  if (enabled_) devices_ = engine_->devices();  // fixed for the engine's life: read once, not per call
  if (enabled_) sweeper_ = std::thread([this] { Sweep(); });
}

IpcHandles::~IpcHandles() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (sweeper_.joinable()) sweeper_.join();
}

grpc::Status IpcHandles::Open(const std::string& field, const std::string& uuid, const std::string& handle,
                              std::shared_ptr<engine::IpcMemory>* out) {
  if (handle.size() != kHandleBytes) {
    return InvalidArgument(field + " has " + std::to_string(handle.size()) + " bytes; a CUDA IPC handle (cudaIpcMemHandle_t) has " +
                   std::to_string(kHandleBytes));
  }
  const std::string key = uuid + handle;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = open_.find(key); it != open_.end()) {
      it->second.last_used = std::chrono::steady_clock::now();
      *out = it->second.memory;
      return grpc::Status::OK;
    }
  }
  // Opened outside mu_ (a driver call) but one at a time: the driver refuses a second open of a
  // handle this process holds, so a call that waited finds the first call's in the map.
  std::lock_guard<std::mutex> opening(open_mu_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = open_.find(key); it != open_.end()) {
      it->second.last_used = std::chrono::steady_clock::now();
      *out = it->second.memory;
      return grpc::Status::OK;
    }
  }
  std::shared_ptr<engine::IpcMemory> memory;
  for (int attempt = 0; !memory; ++attempt) {
    try {
      memory = engine_->OpenIpc(uuid, handle);
    } catch (...) {
      // A freed allocation's handle still open here keeps its address range mapped, and the
      // driver then refuses a new allocation in that range (cudaErrorAlreadyMapped): close
      // the idle handles and try once more.
      if (attempt == 0 && CloseIdle(std::chrono::milliseconds(0)) > 0) continue;
      grpc::Status s = StatusFromException(std::current_exception());
      return {s.error_code(), field + ": " + s.error_message()};
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  auto [it, added] = open_.try_emplace(key, Entry{memory, std::chrono::steady_clock::now()});
  *out = it->second.memory;
  return grpc::Status::OK;
}

grpc::Status IpcHandles::CheckDevice(const std::string& uuid) const {
  std::string served;
  for (const engine::DeviceInfo& d : devices_) {
    if (d.uuid == uuid) return grpc::Status::OK;
    served += (served.empty() ? "" : ", ") + d.name + " " + HexText(d.uuid);
  }
  return {grpc::StatusCode::FAILED_PRECONDITION, kDevicePrefix + "device_uuid " + HexText(uuid) +
                                                     " is not a device of this server (it serves " + served +
                                                     "): call the server of that GPU"};
}

size_t IpcHandles::open_handles() const {
  std::lock_guard<std::mutex> lock(mu_);
  return open_.size();
}

size_t IpcHandles::CloseIdle(std::chrono::milliseconds idle_for) {
  std::vector<std::shared_ptr<engine::IpcMemory>> closing;  // closed outside the lock
  {
    std::lock_guard<std::mutex> lock(mu_);
    const auto now = std::chrono::steady_clock::now();
    for (auto it = open_.begin(); it != open_.end();) {
      // use_count 1: no call holds it (a call's ranges keep their own references).
      if (it->second.memory.use_count() == 1 && now - it->second.last_used >= idle_for) {
        closing.push_back(std::move(it->second.memory));
        it = open_.erase(it);
      } else {
        ++it;
      }
    }
  }
  return closing.size();
}

void IpcHandles::Sweep() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    wake_.wait_for(lock, std::max<std::chrono::milliseconds>(idle_ / 4, std::chrono::milliseconds(50)));
    if (stopping_) break;
    lock.unlock();
    CloseIdle(idle_);
    lock.lock();
  }
  open_.clear();
}

bool LocalPeer(const std::string& peer) {
  auto starts = [&](const char* p) { return peer.rfind(p, 0) == 0; };
  return starts("unix:") || starts("unix-abstract:") || starts("ipv4:127.") || starts("ipv6:[::1]") ||
         starts("ipv6:%5B::1%5D") || starts("ipv6:[::ffff:127.") || starts("ipv6:%5B::ffff:127.");
}

namespace {

// What every header on device memory must get right, read from the header alone (so a
// malformed one reads the same on every server): not with shared memory, sizes of the UUID and
// handles, offsets aligned (value_size: a sort's values; 0 when none), whole elements, the count.
grpc::Status CheckHeader(const v1::DeviceMemory& h, bool with_shared_memory, size_t element_size, size_t value_size,
                         std::optional<uint64_t> declared_count) {
  if (with_shared_memory) {
    return InvalidArgument("header.device_memory: cannot be combined with header.shared_memory (the array lies in one place)");
  }
  if (h.device_uuid().size() != kUuidBytes) {
    return InvalidArgument(kDevicePrefix + "device_uuid has " + std::to_string(h.device_uuid().size()) + " bytes; a device UUID has " +
                   std::to_string(kUuidBytes));
  }
  for (const auto& [handle, field] :
       {std::pair{&h.handle(), "handle"}, std::pair{&h.output_handle(), "output_handle"},
        std::pair{&h.keys_handle(), "keys_handle"},
        std::pair{&h.indices_handle(), "indices_handle"}, std::pair{&h.flags_handle(), "flags_handle"},
        std::pair{&h.values_handle(), "values_handle"}, std::pair{&h.values_output_handle(), "values_output_handle"}}) {
    if (handle->size() == kHandleBytes || (handle->empty() && std::string(field) != "handle")) continue;
    return InvalidArgument(kDevicePrefix + field + " has " + std::to_string(handle->size()) +
                   " bytes; a CUDA IPC handle (cudaIpcMemHandle_t) has " + std::to_string(kHandleBytes));
  }
  for (const auto& [offset, field, size] :
       {std::tuple{h.offset(), "offset", element_size}, std::tuple{h.output_offset(), "output_offset", element_size},
        std::tuple{h.indices_offset(), "indices_offset", sizeof(int64_t)},
        std::tuple{h.values_offset(), "values_offset", std::max<size_t>(value_size, 1)},
        std::tuple{h.values_output_offset(), "values_output_offset", std::max<size_t>(value_size, 1)}}) {
    if (offset % size == 0) continue;
    return InvalidArgument(kDevicePrefix + field + " " + std::to_string(offset) + " is not a multiple of the element size " +
                   std::to_string(size));
  }
  if (h.bytes() % element_size != 0) {
    return InvalidArgument(kDevicePrefix + "bytes " + std::to_string(h.bytes()) + " is not a multiple of the element size " +
                   std::to_string(element_size));
  }
  return CheckDeclaredCount(kDevicePrefix, h.bytes(), element_size, declared_count);
}

// Whether this server opens the caller's memory at all: the switch, the caller's host, the device.
grpc::Status Admit(IpcHandles& handles, const std::string& peer, const std::string& uuid) {
  if (!handles.enabled()) {
    return {grpc::StatusCode::FAILED_PRECONDITION,
            "header.device_memory: this server does not open device memory (start it with --allow-device-ipc, on the "
            "cuda engine)"};
  }
  if (!LocalPeer(peer)) {
    return {grpc::StatusCode::PERMISSION_DENIED,
            "header.device_memory: served only to callers on this host (a unix socket or loopback), not to " + peer};
  }
  return handles.CheckDevice(uuid);
}

// The input range, opened: sessions come from its device's engine.
grpc::Status OpenInput(IpcHandles& handles, const v1::DeviceMemory& h, DeviceRanges* out) {
  if (auto s = OpenRange(handles, h.device_uuid(), "handle", h.handle(), h.offset(), h.bytes(), &out->in_memory,
                         &out->in);
      !s.ok()) {
    return s;
  }
  out->engine = out->in_memory->engine;
  out->device = out->in_memory->device;
  return grpc::Status::OK;
}

// The int64 indices (a compaction's kept ones, a sort's permutation): n of them at indices_handle.
grpc::Status OpenIndices(IpcHandles& handles, const v1::DeviceMemory& h, uint64_t n, DeviceRanges* out,
                         std::vector<Span>* outputs) {
  std::byte* at = nullptr;
  if (auto s = OpenRange(handles, h.device_uuid(), "indices_handle", h.indices_handle(), h.indices_offset(),
                         n * sizeof(int64_t), &out->indices_memory, &at);
      !s.ok()) {
    return s;
  }
  out->indices = reinterpret_cast<int64_t*>(at);
  outputs->push_back({at, n * sizeof(int64_t), "indices_handle"});
  return grpc::Status::OK;
}

// No output may overlap an input or another output.
grpc::Status AllDisjoint(const std::vector<Span>& inputs, const std::vector<Span>& outputs) {
  for (size_t i = 0; i < outputs.size(); ++i) {
    for (const Span& in : inputs) {
      if (auto s = Disjoint(outputs[i], in); !s.ok()) return s;
    }
    for (size_t j = 0; j < i; ++j) {
      if (auto s = Disjoint(outputs[i], outputs[j]); !s.ok()) return s;
    }
  }
  return grpc::Status::OK;
}

}  // namespace

grpc::Status OpenDevice(IpcHandles& handles, const std::string& peer, const v1::DeviceMemory& h,
                        bool with_shared_memory, size_t element_size, const SharedNeeds& needs,
                        std::optional<uint64_t> declared_count, DeviceRanges* out) {
  if (auto s = CheckHeader(h, with_shared_memory, element_size, 0, declared_count); !s.ok()) return s;
  RangeFields fields{Handle(h.output_handle(), h.output_offset()), Handle(h.indices_handle(), h.indices_offset()),
                     Handle(h.flags_handle(), h.flags_offset()),   "output_handle",
                     "indices_handle",                             "flags_handle",
                     "output_offset"};
  if (auto s = CheckRangeFields(kDevicePrefix, fields, needs); !s.ok()) return s;
  for (const auto& [r, field] : {std::pair{Handle(h.values_handle(), h.values_offset()), "values_handle"},
                                 std::pair{Handle(h.values_output_handle(), h.values_output_offset()),
                                           "values_output_handle"}}) {
    if (!r.set && r.offset == 0) continue;
    return InvalidArgument(kDevicePrefix + field + " " + r.shown + ": only a Sort with values reads and writes them");
  }
  const NamedRange keys = Handle(h.keys_handle(), h.keys_offset());
  if (needs.key_bytes == 0 && (keys.set || keys.offset != 0)) {
    return InvalidArgument(kDevicePrefix + "keys_handle " + keys.shown + ": only a SegmentedScan reads keys");
  }
  if (needs.key_bytes > 0 && !keys.set) return InvalidArgument(kDevicePrefix + "keys_handle: required for the segment keys");
  if (needs.key_bytes > 0 && h.keys_offset() % needs.key_bytes != 0) {
    return InvalidArgument(kDevicePrefix + "keys_offset " + std::to_string(h.keys_offset()) +
                   " is not a multiple of the element size " + std::to_string(needs.key_bytes));
  }
  if (auto s = Admit(handles, peer, h.device_uuid()); !s.ok()) return s;
  if (auto s = OpenInput(handles, h, out); !s.ok()) return s;
  const uint64_t n = h.bytes() / element_size;
  out->elements = n;
  const std::string& uuid = h.device_uuid();
  std::vector<Span> outputs, inputs{{out->in, h.bytes(), "handle"}};
  const bool in_place = needs.scan_output && h.output_handle().empty();
  if (in_place) {
    out->out = out->in;
  } else if (needs.scan_output || needs.values_output) {
    if (auto s = OpenRange(handles, uuid, "output_handle", h.output_handle(), h.output_offset(), h.bytes(),
                           &out->out_memory, &out->out);
        !s.ok()) {
      return s;
    }
    // A scan may name its own input range as output (in place by another handle); nothing else overlaps.
    if (!(needs.scan_output && out->out == out->in)) outputs.push_back({out->out, h.bytes(), "output_handle"});
  }
  if (needs.indices_output) {
    if (auto s = OpenIndices(handles, h, n, out, &outputs); !s.ok()) return s;
  }
  if (needs.key_bytes > 0) {
    std::byte* at = nullptr;
    if (auto s = OpenRange(handles, uuid, "keys_handle", h.keys_handle(), h.keys_offset(), n * needs.key_bytes,
                           &out->keys_memory, &at);
        !s.ok()) {
      return s;
    }
    out->keys = at;
    inputs.push_back({at, n * needs.key_bytes, "keys_handle"});
  }
  if (needs.flags_input) {
    std::byte* at = nullptr;
    if (auto s = OpenRange(handles, uuid, "flags_handle", h.flags_handle(), h.flags_offset(), n,
                           &out->flags_memory, &at);
        !s.ok()) {
      return s;
    }
    out->flags = reinterpret_cast<uint8_t*>(at);
    inputs.push_back({at, n, "flags_handle"});
  }
  return AllDisjoint(inputs, outputs);
}

grpc::Status OpenDeviceSort(IpcHandles& handles, const std::string& peer, const v1::DeviceMemory& h,
                            const SortNeeds& needs, std::optional<uint64_t> declared_count, DeviceRanges* out) {
  if (auto s = CheckHeader(h, false, needs.key_size, needs.value_size, declared_count); !s.ok()) return s;
  // Each side range: required when the sort's output asks for it, unset otherwise.
  const struct {
    NamedRange range;
    const char* field;
    bool wanted;
    const char* why;
  } sides[] = {
      {Handle(h.output_handle(), h.output_offset()), "output_handle", needs.keys_output, "the sorted keys"},
      {Handle(h.indices_handle(), h.indices_offset()), "indices_handle", needs.indices_output, "the permutation"},
      {Handle(h.values_handle(), h.values_offset()), "values_handle", needs.value_size > 0, "the values"},
      {Handle(h.values_output_handle(), h.values_output_offset()), "values_output_handle", needs.value_size > 0,
       "the sorted values"},
      {Handle(h.flags_handle(), h.flags_offset()), "flags_handle", false, ""},
      {Handle(h.keys_handle(), h.keys_offset()), "keys_handle", false, ""},
  };
  for (const auto& side : sides) {
    if (side.wanted && !side.range.set) {
      return InvalidArgument(kDevicePrefix + side.field + ": required for " + side.why + " (header.output)");
    }
    if (!side.wanted && (side.range.set || side.range.offset != 0)) {
      return InvalidArgument(kDevicePrefix + side.field + " " + side.range.shown + ": this Sort's output does not use it");
    }
  }
  if (auto s = Admit(handles, peer, h.device_uuid()); !s.ok()) return s;
  if (auto s = OpenInput(handles, h, out); !s.ok()) return s;
  const uint64_t n = h.bytes() / needs.key_size;
  out->elements = n;
  const std::string& uuid = h.device_uuid();
  std::vector<Span> inputs{{out->in, h.bytes(), "handle"}}, outputs;
  if (needs.keys_output) {
    if (auto s = OpenRange(handles, uuid, "output_handle", h.output_handle(), h.output_offset(), h.bytes(),
                           &out->out_memory, &out->out);
        !s.ok()) {
      return s;
    }
    // The sorted keys may replace the input (the engine sorts a copy); nothing else overlaps.
    if (out->out != out->in) outputs.push_back({out->out, h.bytes(), "output_handle"});
  }
  if (needs.indices_output) {
    if (auto s = OpenIndices(handles, h, n, out, &outputs); !s.ok()) return s;
  }
  if (needs.value_size > 0) {
    const uint64_t bytes = n * needs.value_size;
    if (auto s = OpenRange(handles, uuid, "values_handle", h.values_handle(), h.values_offset(), bytes,
                           &out->values_memory, &out->values);
        !s.ok()) {
      return s;
    }
    if (auto s = OpenRange(handles, uuid, "values_output_handle", h.values_output_handle(),
                           h.values_output_offset(), bytes, &out->values_output_memory, &out->values_output);
        !s.ok()) {
      return s;
    }
    inputs.push_back({out->values, bytes, "values_handle"});
    if (out->values_output != out->values) outputs.push_back({out->values_output, bytes, "values_output_handle"});
  }
  return AllDisjoint(inputs, outputs);
}

}  // namespace gpuscan::server
