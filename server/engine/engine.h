// The engine interface: what the gRPC layer asks of a compute backend (CPU or CUDA).
//
// Each call gets a session that processes the array chunk by chunk, in order, carrying state
// from one chunk to the next (a scan's running prefix, a reduction's partial, a compaction's
// element offset), so no layer ever holds the whole array. A session's methods are called by
// one thread at a time; different sessions run concurrently.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/types.h"

namespace gpuscan::engine {

// Chunks of at most this many bytes that a session computes on the host take microseconds (a
// sequential pass, no device work, no waits): see ScanSession::on_host.
inline constexpr uint64_t kSmallChunkBytes = 16 << 10;

// Per-stage time a session spent on one chunk, in microseconds; sessions add to these.
struct StageTimes {
  uint64_t h2d_us = 0;
  uint64_t kernel_us = 0;
  uint64_t d2h_us = 0;
};

// What every session shares: the algorithm it runs and the device it runs on.
class Session {
 public:
  virtual ~Session() = default;
  virtual std::string algorithm() const = 0;  // the algorithm that actually runs
  // The device this session runs on, for Timing.device and the metrics; empty: the engine's
  // device_name(). A DeviceSet names the device of each session it opens.
  const std::string& device() const { return device_; }
  // Names the device, and keeps `hold` until the session ends, after the session has let go of
  // everything else (a DeviceSet's count of the calls open on that device).
  void Place(std::string device, std::shared_ptr<void> hold = nullptr) {
    device_ = std::move(device);
    hold_ = std::move(hold);
  }

 private:
  std::string device_;
  std::shared_ptr<void> hold_;  // a base's member: released after the derived session's
};

class ScanSession : public Session {
 public:
  // Scans the next n elements: `in` and `out` hold n elements of the spec's dtype (raw bytes;
  // they alias only when in_place()). The result continues the scan of all earlier chunks.
  virtual void Process(const void* in, void* out, uint64_t n, StageTimes& times) = 0;
  // Whether Process may also be given one buffer as both `in` and `out` (the result replaces
  // the input): spares the caller a chunk-sized buffer to allocate and clear per chunk.
  virtual bool in_place() const { return false; }
  // Pipelined chunks, for a caller that has the next chunk before it needs this one's result:
  // Begin starts the chunk (its input is read before Begin returns) and End(ticket) finishes
  // it, writing `out`. Ends come in Begin order, and at most one chunk is left begun but not
  // ended when the next begins (Begin k+1, End k). Calls come from one thread at a time, except
  // that with chunks of at most overlap_elements() End(k) may run on another thread while
  // Begin(k+1) runs (then Begin records no stage times). The default runs the chunk in Begin.
  virtual uint64_t Begin(const void* in, void* out, uint64_t n, StageTimes& times) {
    Process(in, out, n, times);
    return 0;
  }
  virtual void End(uint64_t /*ticket*/, StageTimes& /*times*/) {}
  // The whole array at once, already in this session's device memory (a caller's, opened through
  // Engine::OpenIpc): `in` and `out` are device pointers (they alias for a scan in place). Only
  // on a fresh session. Default: kUnimplemented (engines without a device).
  virtual void ProcessDevice(const void* /*in*/, void* /*out*/, uint64_t /*n*/, StageTimes& /*times*/) {
    throw Error(ErrorCode::kUnimplemented, "this engine does not compute on device memory");
  }
  virtual uint64_t overlap_elements() const { return 0; }
  // Whether the next chunk, of n elements, would be computed on the host in microseconds (at
  // most kSmallChunkBytes, no device work, no waits). The service then runs it on gRPC's own
  // thread rather than handing it to a worker and back. Asked between chunks. Default: never.
  virtual bool on_host(uint64_t /*n*/) const { return false; }
};

class ReduceSession : public Session {
 public:
  virtual void Process(const void* in, uint64_t n, StageTimes& times) = 0;
  // The whole array at once in this session's device memory (ScanSession::ProcessDevice).
  virtual void ProcessDevice(const void* /*in*/, uint64_t /*n*/, StageTimes& /*times*/) {
    throw Error(ErrorCode::kUnimplemented, "this engine does not compute on device memory");
  }
  // The reduction of everything processed so far (identity if nothing), as one raw element.
  virtual void Result(void* value) const = 0;
};

class CompactSession : public Session {
 public:
  // Selects from the next n elements (flags: n bytes, nonzero = keep; null when the spec uses a
  // predicate). Writes the kept values to out_values (if the spec wants values; room for n) and
  // their indices in the whole array to out_indices (if it wants indices; room for n), in order.
  // Returns how many were kept.
  virtual uint64_t Process(const void* values, const uint8_t* flags, uint64_t n,
                           void* out_values, int64_t* out_indices, StageTimes& times) = 0;
  // The same over the whole array at once, every pointer in this session's device memory
  // (ScanSession::ProcessDevice).
  virtual uint64_t ProcessDevice(const void* /*values*/, const uint8_t* /*flags*/, uint64_t /*n*/,
                                 void* /*out_values*/, int64_t* /*out_indices*/, StageTimes& /*times*/) {
    throw Error(ErrorCode::kUnimplemented, "this engine does not compute on device memory");
  }
};

class HistogramSession : public Session {
 public:
  virtual void Process(const void* in, uint64_t n, StageTimes& times) = 0;
  // The whole array at once in this session's device memory (ScanSession::ProcessDevice).
  virtual void ProcessDevice(const void* /*in*/, uint64_t /*n*/, StageTimes& /*times*/) {
    throw Error(ErrorCode::kUnimplemented, "this engine does not compute on device memory");
  }
  // The counts so far: bins + kHistogramExtraSlots of them (the bins, then below, above and
  // NaN: engine/histogram.h).
  virtual std::vector<uint64_t> Result() const = 0;
};

class SegmentedScanSession : public Session {
 public:
  // Scans the next n elements: `values` and `out` hold n elements of the spec's dtype, `keys`
  // n keys of its key_dtype or n head bytes (raw bytes, any alignment; out does not alias).
  // Segments continue across calls.
  virtual void Process(const void* values, const void* keys, void* out, uint64_t n, StageTimes& times) = 0;
  // The whole array at once in this session's device memory (ScanSession::ProcessDevice); `out`
  // may be `values` (in place).
  virtual void ProcessDevice(const void* /*values*/, const void* /*keys*/, void* /*out*/, uint64_t /*n*/,
                             StageTimes& /*times*/) {
    throw Error(ErrorCode::kUnimplemented, "this segmented scan is not computed on device memory");
  }
};

class ReduceByKeySession : public Session {
 public:
  // The next n values and their n keys (raw bytes, any alignment). Appends each run completed so
  // far, its key to keys_out and its reduction to values_out (raw little-endian); returns how
  // many. The run the chunk ends in stays open until a different key (or Finish) comes.
  virtual uint64_t Process(const void* values, const void* keys, uint64_t n, std::string* keys_out,
                           std::string* values_out, StageTimes& times) = 0;
  // At the end of the array: appends the last run, if any element came; returns 0 or 1.
  virtual uint64_t Finish(std::string* keys_out, std::string* values_out) = 0;
};

class Scan2DSession : public Session {
 public:
  // Scans the next `rows` whole rows (rows x cols elements of the spec's dtype in `in` and
  // `out`, raw bytes, any alignment; they do not alias), continuing the table of all earlier
  // rows: the carry is the last row.
  virtual void Process(const void* in, void* out, uint64_t rows, StageTimes& times) = 0;
};

// A sort is one step, not a stream of chunks: the whole array, held in host memory, at once.
class SortSession final : public Session {
 public:
  // The engine's sort of the spec it was opened with; returns the algorithm that ran.
  using Function = std::function<std::string(const void* keys, const void* values, uint64_t n, void* keys_out,
                                              void* values_out, int64_t* indices_out, StageTimes& times)>;
  explicit SortSession(Function sort) : sort_(std::move(sort)) {}
  // Sorts n keys (and values), stable: sorted keys to keys_out, the values moved with them to
  // values_out, the permutation to indices_out, each when the spec wants it (else null). On the
  // cuda engine any of them may also be device memory of the session's device (CUDA IPC).
  // Throws Error: kResourceExhausted when the device cannot hold the sort.
  void Run(const void* keys, const void* values, uint64_t n, void* keys_out, void* values_out, int64_t* indices_out,
           StageTimes& times) {
    algorithm_ = sort_(keys, values, n, keys_out, values_out, indices_out, times);
  }
  std::string algorithm() const override { return algorithm_; }  // after Run

 private:
  Function sort_;
  std::string algorithm_;
};

struct DeviceInfo {
  int ordinal = 0;  // the CUDA device ordinal
  std::string name;
  int cc_major = 0;
  int cc_minor = 0;
  uint64_t memory_bytes = 0;
  int multiprocessors = 0;
  std::string uuid;  // 16 raw bytes (cudaDeviceProp.uuid)
};

class Engine;

// Device memory another process of this host exported (cudaIpcGetMemHandle), opened in this
// one on the device it lies on: the whole allocation, at `base` here. Closed
// (cudaIpcCloseMemHandle) when the last holder lets it go. Sessions on it come from `engine`,
// that device's engine (a DeviceSet's member), named `device` (empty: its device_name()).
struct IpcMemory {
  void* base = nullptr;
  uint64_t bytes = 0;
  Engine* engine = nullptr;
  std::string device;
};

// Memory an engine computes on that outlives any call: a resident array's bytes (the service's
// ResidentStore owns them). On the cuda engine device memory of one device, on the cpu engine
// host memory; sessions of `engine` take data() as their ProcessDevice pointers. Freed when the
// last holder lets it go.
class ResidentMemory {
 public:
  virtual ~ResidentMemory() = default;
  virtual std::byte* data() const = 0;
  virtual uint64_t bytes() const = 0;
  // Copies between the caller's host memory and [offset, offset + n) of this memory; the copy
  // has ended when they return. On the cuda engine the other side may also be device memory
  // (IpcMemory's). Throw Error (kInternal) when the device fails. Any thread.
  virtual void Write(uint64_t offset, const void* host, uint64_t n) = 0;
  virtual void Read(uint64_t offset, void* host, uint64_t n) const = 0;
  // Copies [offset, offset + n) of this memory to dst_offset of `dst`, memory of the same engine
  // (a result cut to its size: Compact's kept values); ended when it returns.
  virtual void CopyTo(uint64_t offset, ResidentMemory& dst, uint64_t dst_offset, uint64_t n) const = 0;

  Engine* engine = nullptr;  // the engine of the device it lies on: sessions come from it
  std::string device;        // how Timing names that device (empty: the engine's device_name())
};

// Device memory as the driver reports it, in bytes.
struct DeviceMemory {
  uint64_t used_bytes = 0;   // total - free: every process's allocations on the device, not only ours
  uint64_t total_bytes = 0;
  // What the engine's stream-ordered pool holds from the driver (in use or cached for reuse);
  // empty when the engine has no such pool.
  std::optional<uint64_t> pool_reserved_bytes;
};

// One device's state, for the metrics and the log.
struct DeviceStatus {
  std::string device;          // as Timing.device names it
  bool healthy = true;
  std::string reason;          // why not healthy
  std::optional<uint64_t> open_sessions;  // calls on it now (a DeviceSet counts them)
  std::optional<DeviceMemory> memory;
};

class Engine {
 public:
  virtual ~Engine() = default;
  virtual std::string name() const = 0;         // "cpu" or "cuda"
  virtual std::string device_name() const = 0;  // for Timing.device and logs
  virtual std::vector<DeviceInfo> devices() const = 0;
  virtual std::vector<ScanAlgorithm> scan_algorithms() const = 0;
  // What ScanAlgorithm::kDefault runs for float SUM/PRODUCT (other pairs are exact anyway).
  virtual ScanAlgorithm float_scan_default() const { return ScanAlgorithm::kDeterministic; }
  virtual std::vector<std::string> reduce_algorithms() const = 0;
  virtual std::vector<std::string> compact_algorithms() const = 0;
  // False once the engine hit an error it cannot recover from (the health service reports it).
  virtual bool healthy() const { return true; }
  virtual std::string unhealthy_reason() const { return {}; }
  // After a call failed: examines the device, turning healthy() false when the failure left it
  // unusable (a sticky CUDA error met by an allocation, say, rather than by a checked launch).
  virtual void CheckHealth() {}
  // The device's memory now, for the metrics scrape: nullopt when the engine has no device (cpu)
  // or it cannot be read. Any thread; never throws.
  virtual std::optional<DeviceMemory> device_memory() const { return std::nullopt; }
  // Each device's state (one entry unless the engine is a DeviceSet). Any thread; never throws.
  virtual std::vector<DeviceStatus> device_status() const {
    return {DeviceStatus{device_name(), healthy(), unhealthy_reason(), std::nullopt, device_memory()}};
  }

  // Registers host memory that callers will hand to sessions (a client's shared-memory region),
  // so the engine may copy straight between it and the device instead of through its staging
  // buffers. The registration lasts while the returned handle lives; nullptr when the engine
  // has no use for it (cpu) or the memory cannot be registered (sessions still take it, staged).
  // read_only: the memory is mapped without write access (inputs only). Any thread.
  virtual std::shared_ptr<void> RegisterHost(void* /*data*/, uint64_t /*bytes*/, bool /*read_only*/) {
    return nullptr;
  }
  // Host memory that another engine of this process registered (CUDA registrations are
  // portable: every device may copy straight from and to it): treated as registered here too
  // while the handle lives. A DeviceSet's registration reaches its other devices this way.
  virtual std::shared_ptr<void> AdoptRegistered(void* /*data*/, uint64_t /*bytes*/) { return nullptr; }
  // Whether copies from and to [p, p + bytes) skip the staging buffers (the range is
  // registered or adopted); on a DeviceSet, on every device. Any thread.
  virtual bool registered(const void* /*p*/, uint64_t /*bytes*/) const { return false; }

  // Opens a CUDA IPC handle (64 bytes) of an allocation on the device whose UUID is
  // device_uuid (16 bytes). Throws Error: kFailedPrecondition when this engine has no such
  // device (or none) or the driver cannot open the handle (malformed, or its memory freed or
  // its process gone). Any thread.
  virtual std::shared_ptr<IpcMemory> OpenIpc(const std::string& /*device_uuid*/, const std::string& /*handle*/) {
    throw Error(ErrorCode::kFailedPrecondition, "the " + name() + " engine has no device memory to open");
  }

  // Memory for a resident array of `bytes` (at least 1), on the device with the fewest resident
  // bytes when the engine has several. Throws Error: kResourceExhausted when the device cannot
  // hold it, kUnimplemented when the engine keeps no memory between calls. Any thread.
  virtual std::unique_ptr<ResidentMemory> AllocateResident(uint64_t /*bytes*/) {
    throw Error(ErrorCode::kUnimplemented, "the " + name() + " engine keeps no resident arrays");
  }
  // Host memory of `bytes` (at least 1) that a resident array spills to past the budget: pinned
  // where the engine copies from it fastest (its data() is a host pointer that AllocateResident
  // memory's Read and Write take). Throws as AllocateResident. Any thread.
  virtual std::unique_ptr<ResidentMemory> AllocateSpill(uint64_t /*bytes*/) {
    throw Error(ErrorCode::kUnimplemented, "the " + name() + " engine keeps no resident arrays");
  }

  // These throw Error: kUnimplemented for an algorithm this engine lacks, kInvalidArgument for
  // an operator the dtype does not support, kResourceExhausted when out of memory.
  virtual std::unique_ptr<ScanSession> NewScan(const ScanSpec& spec) = 0;
  virtual std::unique_ptr<ReduceSession> NewReduce(const ReduceSpec& spec) = 0;
  virtual std::unique_ptr<CompactSession> NewCompact(const CompactSpec& spec) = 0;
  // The CPU and CUDA engines serve it; an engine that does not throws kUnimplemented.
  virtual std::unique_ptr<HistogramSession> NewHistogram(const HistogramSpec& /*spec*/) {
    throw Error(ErrorCode::kUnimplemented, "histogram is not available on the " + name() + " engine");
  }
  // The CPU and CUDA engines serve it; an engine that does not throws kUnimplemented.
  virtual std::unique_ptr<SortSession> NewSort(const SortSpec& /*spec*/) {
    throw Error(ErrorCode::kUnimplemented, "sort is not available on the " + name() + " engine");
  }
  // One sort: NewSort(spec), then SortSession::Run. Returns the algorithm that ran.
  std::string Sort(const SortSpec& spec, const void* keys, const void* values, uint64_t n, void* keys_out,
                   void* values_out, int64_t* indices_out, StageTimes& times) {
    auto session = NewSort(spec);
    session->Run(keys, values, n, keys_out, values_out, indices_out, times);
    return session->algorithm();
  }
  virtual std::unique_ptr<SegmentedScanSession> NewSegmentedScan(const SegmentedScanSpec& /*spec*/) {
    throw Error(ErrorCode::kUnimplemented, "segmented scan is not available on the " + name() + " engine");
  }
  // Reduce by key (spec: the values' dtype and operator, the keys' key_dtype; heads and
  // exclusive are ignored). Here: the runs picked out of this engine's segmented scan
  // (engine/reduce_by_key.h); an engine with a kernel of its own overrides it.
  virtual std::unique_ptr<ReduceByKeySession> NewReduceByKey(const SegmentedScanSpec& spec);
  virtual std::unique_ptr<Scan2DSession> NewScan2D(const Scan2DSpec& /*spec*/) {
    throw Error(ErrorCode::kUnimplemented, "2-D scan is not available on the " + name() + " engine");
  }
};

// Which engine to run: kAuto takes CUDA when a device is present, else the CPU.
enum class EngineKind { kAuto, kCuda, kCpu };

struct EngineOptions {
  EngineKind kind = EngineKind::kAuto;
  // CUDA devices to serve, one engine each (a DeviceSet when more than one); empty: every
  // device present. The CPU engine ignores it.
  std::vector<int> devices;
  int streams = 8;       // CUDA engine: staging pairs (two streams each) shared by concurrent calls
  int cpu_threads = 0;   // 0 = all hardware threads
  // CUDA engine: device memory it may allocate (staging pairs, kernel temporaries); beyond it a
  // call gets kResourceExhausted, or waits for a lane when others exist. 0 = no cap.
  uint64_t device_memory_limit = 0;
  // Name the device "ordinal: name" (Timing.device, metrics) even when it is the only one: a
  // worker process serving one device of a front's several (--isolate-devices).
  bool label_ordinal = false;
};

// CUDA devices present (0 without CUDA in this build or on this machine); creates no context.
int CudaDeviceCount();

// Builds the engine `options` ask for; throws Error(kUnavailable) when CUDA is asked for and
// this build or machine has none. `why` receives one line explaining the choice.
std::unique_ptr<Engine> MakeEngine(const EngineOptions& options, std::string* why);

}  // namespace gpuscan::engine
