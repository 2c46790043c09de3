// The CUDA engine's front: one CudaEngine per device (a DeviceSet over several), answering
// Engine's questions and picking each call's session family (engine/cuda/sessions.h). The
// staging resources live in engine/cuda/staging.h, the copy pipeline in engine/cuda/pipeline.h.
#include "engine/cuda_engine.h"

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include <cstring>

#include <algorithm>
#include <functional>
#include <memory>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "engine/cuda/sessions.h"
#include "engine/cuda_resources.h"
#include "engine/device_set.h"

namespace gpuscan::engine {

namespace cuda {

void Check(cudaError_t error, const char* what) {
  if (error == cudaSuccess) return;
  cudaGetLastError();  // clears a non-sticky error so the thread can go on
  const std::string detail = std::string(what) + ": " + cudaGetErrorName(error) + " (" + cudaGetErrorString(error) + ")";
  if (error == cudaErrorMemoryAllocation) throw Error(ErrorCode::kResourceExhausted, "out of device memory: " + detail);
  throw Error(ErrorCode::kInternal, "CUDA error: " + detail);
}

}  // namespace cuda

namespace {

using cuda::Shared;

// Where a device's resident arrays (and the scratch results that stream back) come from: a
// stream-ordered pool of their own that keeps freed blocks for the next allocation (release
// threshold: never), so a call that keeps a 1 GiB result reuses one rather than paying
// cudaMalloc's mapping and cudaFree's device-wide synchronisation (~1 ms each on the H100).
// What it holds beyond the live arrays is at most their peak.
class ResidentPool {
 public:
  explicit ResidentPool(int device) : device_(device) {}
  ~ResidentPool() {
    if (pool_ && cudaSetDevice(device_) == cudaSuccess) cudaMemPoolDestroy(pool_);
    if (stream_) cudaStreamDestroy(stream_);
  }
  // Throws Error (kResourceExhausted when the device is full).
  void* Allocate(uint64_t bytes) {
    std::call_once(made_, [this] { Make(); });
    cuda::Check(cudaSetDevice(device_), "cudaSetDevice");
    void* p = nullptr;
    cuda::Check(cudaMallocFromPoolAsync(&p, bytes, pool_, stream_), "cudaMallocFromPoolAsync (a resident array)");
    // Usable from every stream once the allocation is: the pool's stream holds nothing else.
    cuda::Check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
    return p;
  }
  // Every call that used it has synchronised its own stream before letting go of the memory.
  void Free(void* p) {
    if (cudaSetDevice(device_) != cudaSuccess || cudaFreeAsync(p, stream_) != cudaSuccess) cudaGetLastError();
  }

 private:
  void Make() {
    cuda::Check(cudaSetDevice(device_), "cudaSetDevice");
    cuda::Check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    cudaMemPoolProps props{};
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = device_;
    cuda::Check(cudaMemPoolCreate(&pool_, &props), "cudaMemPoolCreate");
    uint64_t keep = UINT64_MAX;
    cuda::Check(cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrReleaseThreshold, &keep), "cudaMemPoolSetAttribute");
  }

  const int device_;
  std::once_flag made_;
  cudaMemPool_t pool_ = nullptr;
  cudaStream_t stream_ = nullptr;
};

// A resident array in the device's memory, from the device's ResidentPool. The copies are
// synchronous (cudaMemcpy): a Put or Get chunk is done when they return. Their kind is
// cudaMemcpyDefault (unified addressing tells host from device), so the other side may also be
// device memory: a caller's, opened through CUDA IPC, for a Put or Get in device memory.
class DeviceResident final : public ResidentMemory {
 public:
  DeviceResident(std::shared_ptr<Shared> sh, std::shared_ptr<ResidentPool> pool, uint64_t bytes, Engine* owner)
      : sh_(std::move(sh)), pool_(std::move(pool)), bytes_(bytes) {
    ptr_ = static_cast<std::byte*>(pool_->Allocate(bytes));
    engine = owner;
  }
  ~DeviceResident() override { pool_->Free(ptr_); }
  std::byte* data() const override { return ptr_; }
  uint64_t bytes() const override { return bytes_; }
  void Write(uint64_t offset, const void* host, uint64_t n) override {
    cuda::Check(cudaSetDevice(sh_->device), "cudaSetDevice");
    cuda::Check(cudaMemcpy(ptr_ + offset, host, n, cudaMemcpyDefault), "cudaMemcpy to a resident array");
  }
  void Read(uint64_t offset, void* host, uint64_t n) const override {
    cuda::Check(cudaSetDevice(sh_->device), "cudaSetDevice");
    cuda::Check(cudaMemcpy(host, ptr_ + offset, n, cudaMemcpyDefault), "cudaMemcpy from a resident array");
  }
  void CopyTo(uint64_t offset, ResidentMemory& dst, uint64_t dst_offset, uint64_t n) const override {
    cuda::Check(cudaSetDevice(sh_->device), "cudaSetDevice");
    cuda::Check(cudaMemcpy(dst.data() + dst_offset, ptr_ + offset, n, cudaMemcpyDeviceToDevice),
                "cudaMemcpy between resident arrays");
  }

 private:
  std::shared_ptr<Shared> sh_;
  std::shared_ptr<ResidentPool> pool_;  // outlives the engine while an array does
  std::byte* ptr_ = nullptr;
  uint64_t bytes_;
};

// Pinned host memory for spilled arrays, keeping freed blocks: cudaMallocHost and cudaFreeHost
// of 1 GiB took ~0.3 s together on the H100 host, 5x the copies they serve. A block is reused for
// a request of at most its size and at least half of it; before a new one is made, the blocks
// that could not serve are freed, so what it holds stays near the peak in use.
class PinnedCache {
 public:
  ~PinnedCache() {
    for (auto& [bytes, p] : free_) cudaFreeHost(p);
  }
  // Throws Error (kResourceExhausted when no pinned memory is left). *got: the block's size.
  void* Take(int device, uint64_t bytes, uint64_t* got) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = free_.lower_bound(bytes);
      if (it != free_.end() && it->first / 2 <= bytes) {
        void* p = it->second;
        *got = it->first;
        free_.erase(it);
        return p;
      }
      for (auto& [size, p] : free_) cudaFreeHost(p);
      free_.clear();
    }
    cuda::Check(cudaSetDevice(device), "cudaSetDevice");
    void* p = nullptr;
    if (cudaMallocHost(&p, bytes) != cudaSuccess) {
      cudaGetLastError();
      throw Error(ErrorCode::kResourceExhausted, "no pinned host memory for " + std::to_string(bytes) + " bytes");
    }
    *got = bytes;
    return p;
  }
  void Give(void* p, uint64_t bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    free_.emplace(bytes, p);
  }

 private:
  std::mutex mu_;
  std::multimap<uint64_t, void*> free_;  // size -> block
};

// Pinned host memory a resident array spills to: the device copies to and from it at the PCIe
// link's speed (pageable memory is staged through a driver buffer).
class PinnedSpill final : public ResidentMemory {
 public:
  PinnedSpill(int device, std::shared_ptr<PinnedCache> cache, uint64_t bytes, Engine* owner)
      : cache_(std::move(cache)), bytes_(bytes) {
    ptr_ = cache_->Take(device, bytes, &block_);
    engine = owner;
  }
  ~PinnedSpill() override { cache_->Give(ptr_, block_); }
  std::byte* data() const override { return static_cast<std::byte*>(ptr_); }
  uint64_t bytes() const override { return bytes_; }
  void Write(uint64_t offset, const void* host, uint64_t n) override { std::memcpy(data() + offset, host, n); }
  void Read(uint64_t offset, void* host, uint64_t n) const override { std::memcpy(host, data() + offset, n); }
  void CopyTo(uint64_t offset, ResidentMemory& dst, uint64_t dst_offset, uint64_t n) const override {
    dst.Write(dst_offset, data() + offset, n);
  }

 private:
  std::shared_ptr<PinnedCache> cache_;  // outlives the engine while a spilled array does
  void* ptr_ = nullptr;
  uint64_t bytes_;
  uint64_t block_ = 0;  // the block's size (at least bytes_)
};

class CudaEngine final : public Engine {
 public:
  explicit CudaEngine(std::shared_ptr<Shared> sh)
      : sh_(std::move(sh)), resident_pool_(std::make_shared<ResidentPool>(sh_->device)) {}

  std::string name() const override { return "cuda"; }
  std::string device_name() const override { return sh_->prop.name; }
  std::vector<DeviceInfo> devices() const override {
    DeviceInfo d;
    d.ordinal = sh_->device;
    d.name = sh_->prop.name;
    d.cc_major = sh_->prop.major;
    d.cc_minor = sh_->prop.minor;
    d.memory_bytes = sh_->prop.totalGlobalMem;
    d.multiprocessors = sh_->prop.multiProcessorCount;
    d.uuid.assign(sh_->prop.uuid.bytes, sizeof(sh_->prop.uuid.bytes));
    return {d};
  }
  std::vector<ScanAlgorithm> scan_algorithms() const override {
    return {ScanAlgorithm::kDefault,   ScanAlgorithm::kDecoupledLookback, ScanAlgorithm::kChained,
            ScanAlgorithm::kReduceThenScan, ScanAlgorithm::kKoggeStone, ScanAlgorithm::kBrentKung,
            ScanAlgorithm::kBlelloch,  ScanAlgorithm::kHillisSteele,      ScanAlgorithm::kCub,
            ScanAlgorithm::kDeterministic};
  }
  std::vector<std::string> reduce_algorithms() const override { return {"one_pass", "deterministic"}; }
  std::vector<std::string> compact_algorithms() const override { return {"single_pass"}; }
  bool healthy() const override { return sh_->healthy; }
  void CheckHealth() override {
    if (!sh_->healthy) return;
    // Only after a failure: the synchronisation waits for every stream of the device.
    cudaError_t e = cudaSetDevice(sh_->device);
    if (e == cudaSuccess) e = cudaDeviceSynchronize();
    if (e == cudaSuccess) return;
    sh_->MarkUnhealthy(std::string("device check after a failed call: ") + cudaGetErrorName(e) + " (" +
                       cudaGetErrorString(e) + ")");
  }
  std::string unhealthy_reason() const override {
    std::lock_guard<std::mutex> lock(sh_->reason_mu);
    return sh_->reason;
  }

  // Called from the metrics scrape thread: sets the device on that thread and reads without
  // Shared::Call, so a failure here neither throws nor marks the engine unhealthy (a sticky
  // error is the pipelines' to report); the gauges are just left out of that scrape.
  std::optional<DeviceMemory> device_memory() const override {
    size_t free_bytes = 0, total_bytes = 0;
    if (cudaSetDevice(sh_->device) != cudaSuccess || cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) {
      cudaGetLastError();  // clear a non-sticky error so this thread's next CUDA call is unaffected
      return std::nullopt;
    }
    DeviceMemory m;
    m.total_bytes = total_bytes;
    m.used_bytes = total_bytes - std::min(free_bytes, total_bytes);
    cudaMemPool_t pool;
    uint64_t reserved = 0;
    if (cudaDeviceGetDefaultMemPool(&pool, sh_->device) == cudaSuccess &&
        cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &reserved) == cudaSuccess) {
      m.pool_reserved_bytes = reserved;
    } else {
      cudaGetLastError();
    }
    return m;
  }

  std::shared_ptr<void> RegisterHost(void* data, uint64_t bytes, bool read_only) override {
    if (bytes == 0 || cudaSetDevice(sh_->device) != cudaSuccess) return nullptr;
    // Portable: pinned for every device's context, so the other engines of a DeviceSet adopt it.
    const unsigned flags = cudaHostRegisterPortable | (read_only ? cudaHostRegisterReadOnly : 0u);
    if (cudaHostRegister(data, bytes, flags) != cudaSuccess) {
      cudaGetLastError();  // not sticky: the region is used staged instead
      return nullptr;
    }
    return Pin(data, bytes, [sh = sh_](void* p) {
      if (cudaSetDevice(sh->device) == cudaSuccess && cudaHostUnregister(p) != cudaSuccess) cudaGetLastError();
    });
  }

  std::shared_ptr<void> AdoptRegistered(void* data, uint64_t bytes) override {
    if (bytes == 0) return nullptr;
    return Pin(data, bytes, [](void*) {});
  }

  bool registered(const void* p, uint64_t bytes) const override { return sh_->Pinned(p, bytes); }

  std::shared_ptr<IpcMemory> OpenIpc(const std::string& device_uuid, const std::string& handle) override {
    if (device_uuid != std::string(sh_->prop.uuid.bytes, sizeof(sh_->prop.uuid.bytes))) {
      throw Error(ErrorCode::kFailedPrecondition, "the device is not this server's " + device_name());
    }
    cudaIpcMemHandle_t h;
    if (handle.size() != sizeof(h.reserved)) {
      throw Error(ErrorCode::kInvalidArgument, "a CUDA IPC handle has " + std::to_string(sizeof(h.reserved)) +
                                                   " bytes, not " + std::to_string(handle.size()));
    }
    std::memcpy(h.reserved, handle.data(), sizeof(h.reserved));
    cuda::Check(cudaSetDevice(sh_->device), "cudaSetDevice");
    void* base = nullptr;
    // Not sticky: a bad handle fails this call alone.
    if (const cudaError_t e = cudaIpcOpenMemHandle(&base, h, cudaIpcMemLazyEnablePeerAccess); e != cudaSuccess) {
      cudaGetLastError();
      throw Error(ErrorCode::kFailedPrecondition,
                  std::string("the driver cannot open the handle (malformed, or its memory was freed or its process "
                              "ended): ") + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")");
    }
    auto mem = std::shared_ptr<IpcMemory>(new IpcMemory{base, 0, this, {}}, [sh = sh_](IpcMemory* m) {
      if (cudaSetDevice(sh->device) != cudaSuccess || cudaIpcCloseMemHandle(m->base) != cudaSuccess) cudaGetLastError();
      delete m;
    });
    mem->bytes = AllocationBytes(base);
    return mem;
  }

  std::unique_ptr<ResidentMemory> AllocateResident(uint64_t bytes) override {
    return std::make_unique<DeviceResident>(sh_, resident_pool_, bytes, this);
  }
  std::unique_ptr<ResidentMemory> AllocateSpill(uint64_t bytes) override {
    return std::make_unique<PinnedSpill>(sh_->device, pinned_, bytes, this);
  }

  std::unique_ptr<ScanSession> NewScan(const ScanSpec& spec) override { return cuda::NewScan(sh_, spec); }
  std::unique_ptr<ReduceSession> NewReduce(const ReduceSpec& spec) override { return cuda::NewReduce(sh_, spec); }
  std::unique_ptr<CompactSession> NewCompact(const CompactSpec& spec) override { return cuda::NewCompact(sh_, spec); }
  std::unique_ptr<SegmentedScanSession> NewSegmentedScan(const SegmentedScanSpec& spec) override {
    return cuda::NewSegmentedScan(sh_, spec);
  }
  std::unique_ptr<ReduceByKeySession> NewReduceByKey(const SegmentedScanSpec& spec) override {
    if (auto s = cuda::NewReduceByKey(sh_, spec)) return s;
    return Engine::NewReduceByKey(spec);
  }
  std::unique_ptr<Scan2DSession> NewScan2D(const Scan2DSpec& spec) override {
    if (spec.cols == 0) throw Error(ErrorCode::kInvalidArgument, "a 2-D scan needs at least one column");
    return cuda::NewScan2D(sh_, spec);
  }
  std::unique_ptr<SortSession> NewSort(const SortSpec& spec) override {
    return std::make_unique<SortSession>([sh = sh_, spec](const void* keys, const void* values, uint64_t n,
                                                         void* keys_out, void* values_out, int64_t* indices_out,
                                                         StageTimes& times) {
      return cuda::Sort(*sh, spec, keys, values, n, keys_out, values_out, indices_out, times);
    });
  }
  std::unique_ptr<HistogramSession> NewHistogram(const HistogramSpec& spec) override {
    CheckHistogramSpec(spec);
    return cuda::NewHistogram(sh_, spec);
  }

 private:
  // Lists [data, data + bytes) among the ranges copies use directly, until the handle goes;
  // then `release` (dropped by the range's owner once no call uses it: no copy is in flight).
  std::shared_ptr<void> Pin(void* data, uint64_t bytes, std::function<void(void*)> release) {
    const auto begin = reinterpret_cast<uintptr_t>(data);
    {
      std::lock_guard<std::mutex> lock(sh_->pins_mu);
      sh_->pins.emplace_back(begin, begin + bytes);
    }
    return std::shared_ptr<void>(data, [sh = sh_, begin, release = std::move(release)](void* p) {
      {
        std::lock_guard<std::mutex> lock(sh->pins_mu);
        auto& v = sh->pins;
        // One entry per Pin (a range may be listed twice: two engines of one device).
        auto it = std::find_if(v.begin(), v.end(), [&](const auto& r) { return r.first == begin; });
        if (it != v.end()) v.erase(it);
      }
      release(p);
    });
  }

  // The size of the allocation at `base`, from the driver (cuMemGetAddressRange, reached
  // through the runtime so this build needs no libcuda at link time).
  static uint64_t AllocationBytes(void* base) {
    static const PFN_cuMemGetAddressRange_v3020 range = [] {
      void* fn = nullptr;
      cudaDriverEntryPointQueryResult found{};
      if (cudaGetDriverEntryPointByVersion("cuMemGetAddressRange", &fn, 3020, cudaEnableDefault, &found) !=
              cudaSuccess ||
          found != cudaDriverEntryPointSuccess) {
        cudaGetLastError();
        fn = nullptr;
      }
      return reinterpret_cast<PFN_cuMemGetAddressRange_v3020>(fn);
    }();
    if (!range) throw Error(ErrorCode::kInternal, "the driver lacks cuMemGetAddressRange");
    CUdeviceptr start = 0;
    size_t bytes = 0;
    if (range(&start, &bytes, reinterpret_cast<CUdeviceptr>(base)) != CUDA_SUCCESS) {
      throw Error(ErrorCode::kInternal, "cuMemGetAddressRange failed on an opened IPC handle");
    }
    return bytes;
  }

  std::shared_ptr<Shared> sh_;
  std::shared_ptr<ResidentPool> resident_pool_;
  std::shared_ptr<PinnedCache> pinned_ = std::make_shared<PinnedCache>();  // spilled arrays' host memory
};

}  // namespace

std::unique_ptr<Engine> MakeCudaEngine(const EngineOptions& options, std::string* reason) {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    cudaGetLastError();
    *reason = e != cudaSuccess ? std::string("no usable CUDA device (") + cudaGetErrorName(e) + ": " +
                                     cudaGetErrorString(e) + ")"
                               : "no CUDA device";
    return nullptr;
  }
  std::vector<int> ordinals = options.devices;
  if (ordinals.empty()) {
    for (int d = 0; d < count; ++d) ordinals.push_back(d);
  }
  std::vector<std::unique_ptr<Engine>> engines;
  std::vector<std::string> labels;
  for (const int device : ordinals) {
    if (device < 0 || device >= count) {
      throw Error(ErrorCode::kInvalidArgument, "--devices names device " + std::to_string(device) + " but " +
                                                   std::to_string(count) + " CUDA device(s) are present (0-" +
                                                   std::to_string(count - 1) + ")");
    }
    auto sh = std::make_shared<cuda::Shared>(device, options.streams, options.device_memory_limit);
    cuda::Check(cudaSetDevice(device), "cudaSetDevice");
    cuda::Check(cudaGetDeviceProperties(&sh->prop, device), "cudaGetDeviceProperties");
    // Keep freed pool memory for reuse instead of returning it to the driver at every sync.
    cudaMemPool_t pool;
    cuda::Check(cudaDeviceGetDefaultMemPool(&pool, device), "cudaDeviceGetDefaultMemPool");
    uint64_t threshold = UINT64_MAX;
    cuda::Check(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold), "cudaMemPoolSetAttribute");
    labels.push_back(std::to_string(device) + ": " + sh->prop.name);
    engines.push_back(std::make_unique<CudaEngine>(std::move(sh)));
  }
  if (engines.size() == 1 && !options.label_ordinal) {
    *reason = "CUDA device " + labels[0];
    return std::move(engines[0]);
  }
  *reason = (engines.size() == 1 ? "CUDA device " : "CUDA devices ") + labels[0];
  for (size_t i = 1; i < labels.size(); ++i) *reason += ", " + labels[i];
  return std::make_unique<DeviceSet>(std::move(engines), std::move(labels));
}

}  // namespace gpuscan::engine
