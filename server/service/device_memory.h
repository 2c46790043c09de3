// Calls whose arrays lie in the caller's device memory (header.device_memory, CUDA IPC): the
// switch and the peer check, the cache of opened handles, and the checked ranges of one call.
// The handlers keep their other paths; this is the part of theirs that differs.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include <grpcpp/support/status.h>

#include "engine/engine.h"
#include "gpuscan/v1/gpuscan.pb.h"
#include "service/shared_memory.h"

namespace gpuscan::server {

// The handles callers sent, each opened once and kept while a call uses it and for `idle`
// after, so a caller's later calls on the same allocation cost no open. A thread of its own
// closes the idle ones: memory a caller freed, or a caller that exited, keeps nothing of the
// device's for longer than that. Thread-safe.
class IpcHandles {
 public:
  // enabled: --allow-device-ipc. engine: where handles are opened (nullptr: disabled).
  IpcHandles(engine::Engine* engine, bool enabled, std::chrono::milliseconds idle = std::chrono::seconds(5));
  ~IpcHandles();
  IpcHandles(const IpcHandles&) = delete;
  IpcHandles& operator=(const IpcHandles&) = delete;

  bool enabled() const { return enabled_; }
  // The opened allocation of `handle` on the device named by `uuid`; `field` names the handle in
  // errors. FAILED_PRECONDITION (another device, a handle the driver cannot open),
  // INVALID_ARGUMENT (sizes).
  grpc::Status Open(const std::string& field, const std::string& uuid, const std::string& handle,
                    std::shared_ptr<engine::IpcMemory>* out);
  size_t open_handles() const;  // for tests and logs
  // FAILED_PRECONDITION naming header.device_memory.device_uuid unless a device of this server has it.
  grpc::Status CheckDevice(const std::string& uuid) const;

 private:
  struct Entry {
    std::shared_ptr<engine::IpcMemory> memory;
    std::chrono::steady_clock::time_point last_used;
  };
  void Sweep();
  // Closes the handles no call holds that were last used at least idle_for ago; returns how many.
  size_t CloseIdle(std::chrono::milliseconds idle_for);

  engine::Engine* engine_;
  std::vector<engine::DeviceInfo> devices_;  // the engine's, when enabled
  bool enabled_;
  std::chrono::milliseconds idle_;
  std::mutex open_mu_;  // held while a new handle is opened (before mu_)
  mutable std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::map<std::string, Entry> open_;  // by uuid + handle
  std::thread sweeper_;  // last: started once the rest is built
};

// The checked, opened ranges of one call. The memory handles keep the allocations open.
struct DeviceRanges {
  std::shared_ptr<engine::IpcMemory> in_memory, out_memory, indices_memory, flags_memory;
  std::byte* in = nullptr;
  std::byte* out = nullptr;  // `in` for a scan in place
  int64_t* indices = nullptr;
  uint8_t* flags = nullptr;
  std::byte* values = nullptr;         // Sort with values: the values, and where they go sorted
  std::byte* values_output = nullptr;  // (`values` itself in place)
  std::shared_ptr<engine::IpcMemory> values_memory, values_output_memory;
  std::byte* keys = nullptr;  // SegmentedScan: the keys or head bytes
  std::shared_ptr<engine::IpcMemory> keys_memory;
  uint64_t elements = 0;
  engine::Engine* engine = nullptr;  // the device's engine: sessions come from it
  std::string device;                // how Timing names that device (empty: the engine's name)
};

// Whether `peer` (grpc::ServerContext::peer()) is on this host: a unix socket or loopback.
bool LocalPeer(const std::string& peer);

// Checks header.device_memory for an RPC with these needs and opens its handles:
// FAILED_PRECONDITION when device IPC is off, PERMISSION_DENIED for a peer not on this host,
// INVALID_ARGUMENT naming the field for sizes, misalignment, overlaps and the range rules
// SharedMemory has, OUT_OF_RANGE for a range beyond its allocation, and IpcHandles::Open's.
// with_shared_memory: the header sets shared_memory as well (INVALID_ARGUMENT).
grpc::Status OpenDevice(IpcHandles& handles, const std::string& peer, const v1::DeviceMemory& header,
                        bool with_shared_memory, size_t element_size, const SharedNeeds& needs,
                        std::optional<uint64_t> declared_count, DeviceRanges* out);

// What a Sort reads and writes besides its keys.
struct SortNeeds {
  size_t key_size = 4;
  bool keys_output = true;      // header.output has keys: output_handle
  bool indices_output = false;  // has indices: indices_handle (int64)
  size_t value_size = 0;        // KEYS_AND_VALUES: values_handle and values_output_handle
};

// OpenDevice for a Sort: its own range rules (each side range required when the output asks for
// it, unset otherwise; the sorted keys or values may replace their input range, nothing else
// overlaps).
grpc::Status OpenDeviceSort(IpcHandles& handles, const std::string& peer, const v1::DeviceMemory& header,
                            const SortNeeds& needs, std::optional<uint64_t> declared_count, DeviceRanges* out);

// A call's session: on the engine of its arrays' device when they lie in device memory, named
// after that device; else from `engine`. make(engine) opens it.
template <class Make>
auto OpenSession(engine::Engine& engine, const std::optional<DeviceRanges>& device, Make&& make) {
  auto session = make(device ? *device->engine : engine);
  if (device && !device->device.empty()) session->Place(device->device);
  return session;
}

}  // namespace gpuscan::server
