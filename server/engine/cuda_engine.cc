#include "engine/cuda_engine.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <mutex>
#include <optional>
#include <type_traits>
#include <vector>

#include "engine/cuda_resources.h"
#include "engine/device_set.h"
#include "engine/cpu_engine.h"
#include "engine/dispatch.h"
#include "engine/host_scan.h"
#include "engine/reduce_by_key.h"
#include "engine/segmented_scan.h"
#include "gpuscan/kernels/canonical_scan.h"
#include "gpuscan/kernels/canonical_tree.h"
#include "gpuscan/kernels/compact.h"
#include "gpuscan/kernels/histogram.h"
#include "gpuscan/kernels/reduce.h"
#include "gpuscan/kernels/reduce_by_key.h"
#include "gpuscan/kernels/scan.h"
#include "gpuscan/kernels/scan2d.h"
#include "gpuscan/kernels/segmented_scan.h"
#include "gpuscan/kernels/sort.h"
#include "gpuscan/kernels/temp_storage.h"

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

// Each chunk travels in sub-chunks of at most this many bytes through two staging slots.
// 2 MiB keeps kernels long enough to amortise their launch while a 4 MiB chunk still gets
// copy/compute overlap.
constexpr size_t kSubChunkBytes = size_t{2} << 20;
// Indices (int64) of the most elements a sub-chunk can hold (4-byte dtypes).
constexpr size_t kIndexBytes = kSubChunkBytes / 4 * sizeof(int64_t);
constexpr size_t kFlagBytes = kSubChunkBytes / 4;

uint64_t ElapsedUs(cudaEvent_t from, cudaEvent_t to) {
  float ms = 0;
  if (cudaEventElapsedTime(&ms, from, to) != cudaSuccess) return 0;
  return static_cast<uint64_t>(std::llround(ms * 1000.0));
}

// One staging slot: its own stream, pinned and device buffers, and the events that time it.
struct Slot {
  cuda::Stream stream;
  cuda::Event start, h2d_done, kernel_start, kernel_done, d2h_done;
  cuda::PinnedBuffer h_in{kSubChunkBytes}, h_flags{kFlagBytes}, h_out{kSubChunkBytes}, h_idx{kIndexBytes},
      h_count{sizeof(uint64_t)};
  cuda::DeviceBuffer d_in, d_flags, d_out, d_idx, d_count;
  // The sub-chunk in flight: where its results go once it is done.
  bool busy = false;
  uint64_t ticket = 0;  // ScanSession::Begin's ticket of the chunk in flight (0: none)
  bool downloads = false;
  char* out_dst = nullptr;
  size_t out_bytes = 0;

  explicit Slot(cuda::DeviceMemoryBudget* budget)
      : d_in(kSubChunkBytes, stream.get(), budget),
        d_flags(kFlagBytes, stream.get(), budget),
        d_out(kSubChunkBytes, stream.get(), budget),
        d_idx(kIndexBytes, stream.get(), budget),
        d_count(sizeof(uint64_t), stream.get(), budget) {}

  cudaStream_t s() const { return stream.get(); }
};

// Device bytes of a lane's two slots. A lane takes them from the budget in one piece before it
// allocates any: under a --device-memory-limit that fits one lane, two calls building lanes at
// once could otherwise each hold half a lane, both fail, and the second find no lane to wait for.
constexpr size_t kSlotDeviceBytes = 2 * kSubChunkBytes + kFlagBytes + kIndexBytes + sizeof(uint64_t);
constexpr size_t kLaneStagingBytes = 2 * kSlotDeviceBytes;

// Bytes taken from a budget while it lives (Take throws kResourceExhausted naming the flag).
class BudgetReservation {
 public:
  BudgetReservation(cuda::DeviceMemoryBudget* budget, size_t bytes) : budget_(budget), bytes_(bytes) {
    budget_->Take(bytes_);
  }
  ~BudgetReservation() { budget_->Give(bytes_); }
  BudgetReservation(const BudgetReservation&) = delete;
  BudgetReservation& operator=(const BudgetReservation&) = delete;

 private:
  cuda::DeviceMemoryBudget* budget_;
  size_t bytes_;
};

// A lane: two slots (copy of one overlaps the kernel of the other) and the kernels' temporary
// storage. A session holds a lane for one Process call; lanes are reused across calls.
struct Lane {
  // The slots allocate uncounted: the reservation counts them.
  explicit Lane(cuda::DeviceMemoryBudget* b)
      : budget(b), staging(b, kLaneStagingBytes), slots{Slot(nullptr), Slot(nullptr)} {}
  cuda::DeviceMemoryBudget* budget;
  BudgetReservation staging;
  Slot slots[2];
  cuda::DeviceBuffer temp;
  cudaEvent_t last_kernel = nullptr;  // the most recent kernel on this lane (kernels run in order)

  void EnsureTemp(size_t bytes) {
    if (bytes <= temp.size()) return;
    Quiesce();
    temp = cuda::DeviceBuffer(std::max<size_t>(bytes, 1 << 20), slots[0].s(), budget);
    cuda::Check(kernels::ClearTempStorage(temp.get(), temp.size(), slots[0].s()), "ClearTempStorage");
  }
  // Waits for everything on the lane; used before reuse after an error.
  void Quiesce() {
    for (Slot& s : slots) {
      cudaStreamSynchronize(s.s());
      s.busy = false;
    }
    last_kernel = nullptr;
  }
};

class LanePool {
 public:
  LanePool(int max_lanes, cuda::DeviceMemoryBudget* budget) : max_lanes_(std::max(1, max_lanes)), budget_(budget) {}
  Lane* Acquire() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      if (!free_.empty()) {
        Lane* lane = free_.back();
        free_.pop_back();
        return lane;
      }
      if (static_cast<int>(all_.size()) < max_lanes_) {
        all_.push_back(nullptr);  // reserve the place; build outside the lock
        lock.unlock();
        std::unique_ptr<Lane> lane;
        try {
          lane = std::make_unique<Lane>(budget_);
        } catch (const Error& e) {
          lock.lock();
          all_.erase(std::find(all_.begin(), all_.end(), nullptr));
          // Out of device memory (or over --device-memory-limit) while other lanes exist or are
          // being built: run with those, waiting for one, instead of failing the call. Only a
          // call that finds no other lane at all fails; waiters wake and retry then.
          cv_.notify_all();
          if (e.code() != ErrorCode::kResourceExhausted || all_.empty()) throw;
          max_lanes_ = static_cast<int>(all_.size());
          continue;
        } catch (...) {
          lock.lock();
          all_.erase(std::find(all_.begin(), all_.end(), nullptr));
          cv_.notify_all();
          throw;
        }
        Lane* raw = lane.get();
        lock.lock();
        *std::find(all_.begin(), all_.end(), nullptr) = std::move(lane);
        return raw;
      }
      cv_.wait(lock);
    }
  }
  void Release(Lane* lane) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      free_.push_back(lane);
    }
    cv_.notify_one();
  }

 private:
  int max_lanes_;  // lowered when device memory runs out with lanes already built
  cuda::DeviceMemoryBudget* budget_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::unique_ptr<Lane>> all_;
  std::vector<Lane*> free_;
};

// State the engine and its sessions share (sessions may outlive the engine object).
struct Shared {
  int device = 0;
  cudaDeviceProp prop{};
  cuda::DeviceMemoryBudget budget;  // before lanes: they allocate from it
  LanePool lanes;
  std::atomic<bool> healthy{true};
  std::mutex reason_mu;
  std::string reason;

  Shared(int dev, int max_lanes, size_t memory_limit)
      : device(dev), budget(memory_limit), lanes(max_lanes, &budget) {}

  // Host ranges registered through Engine::RegisterHost (shared-memory regions): copies from
  // and to them go straight to the device, skipping the staging buffers and their memcpy.
  mutable std::mutex pins_mu;
  std::vector<std::pair<uintptr_t, uintptr_t>> pins;
  bool Pinned(const void* p, size_t bytes) const {
    const auto b = reinterpret_cast<uintptr_t>(p);
    std::lock_guard<std::mutex> lock(pins_mu);
    for (const auto& [begin, end] : pins) {
      if (b >= begin && b + bytes <= end) return true;
    }
    return false;
  }

  // Runs a CUDA call; on failure decides whether the device is still usable. A sticky error
  // (the context is corrupt: every later call fails too) marks the engine unhealthy, so the
  // health service reports NOT_SERVING; the call itself fails with UNAVAILABLE.
  void Call(cudaError_t error, const char* what) {
    if (error == cudaSuccess) return;
    if (error != cudaErrorMemoryAllocation && cudaDeviceSynchronize() != cudaSuccess) {
      const std::string detail = std::string(what) + ": " + cudaGetErrorName(error) + " (" + cudaGetErrorString(error) + ")";
      MarkUnhealthy(detail);
      throw Error(ErrorCode::kUnavailable, "the CUDA device failed: " + detail);
    }
    cuda::Check(error, what);
  }

  void MarkUnhealthy(const std::string& detail) {
    {
      std::lock_guard<std::mutex> lock(reason_mu);
      if (reason.empty()) reason = "sticky CUDA error on device " + std::to_string(device) + ": " + detail;
    }
    healthy = false;
  }
};

// Holds a lane for one Process call; after an error the lane is drained before reuse.
class LaneLease {
 public:
  explicit LaneLease(Shared& shared) : shared_(shared), lane_(shared.lanes.Acquire()) {}
  ~LaneLease() {
    if (std::uncaught_exceptions() > entry_exceptions_) lane_->Quiesce();
    shared_.lanes.Release(lane_);
  }
  Lane* operator->() const { return lane_; }
  Lane& operator*() const { return *lane_; }

 private:
  Shared& shared_;
  Lane* lane_;
  int entry_exceptions_ = std::uncaught_exceptions();
};

// The per-sub-chunk steps every session shares.
// Pageable memory (protobuf bytes) is staged into the slot's pinned buffer first; registered
// memory (Engine::RegisterHost) is copied from directly.
const void* Staged(Shared& sh, const void* src, size_t bytes, const cuda::PinnedBuffer& staging) {
  if (sh.Pinned(src, bytes)) return src;
  std::memcpy(staging.get(), src, bytes);
  return staging.get();
}

// Uploads the values to d_in and, when `side` is set, side_bytes of a second input beside them
// (compaction's flags, a segmented scan's keys) through `side_staging` to `side_dst`.
void Upload(Shared& sh, Slot& s, const void* src, size_t bytes, const void* side, size_t side_bytes,
            const cuda::PinnedBuffer& side_staging, void* side_dst) {
  const void* from = Staged(sh, src, bytes, s.h_in);
  const void* side_from = side ? Staged(sh, side, side_bytes, side_staging) : nullptr;
  sh.Call(cudaEventRecord(s.start.get(), s.s()), "cudaEventRecord");
  sh.Call(cudaMemcpyAsync(s.d_in.get(), from, bytes, cudaMemcpyHostToDevice, s.s()), "H2D values");
  if (side) {
    sh.Call(cudaMemcpyAsync(side_dst, side_from, side_bytes, cudaMemcpyHostToDevice, s.s()), "H2D flags or keys");
  }
  sh.Call(cudaEventRecord(s.h2d_done.get(), s.s()), "cudaEventRecord");
}

void Upload(Shared& sh, Slot& s, const void* src, size_t bytes, const uint8_t* flags, size_t flag_bytes) {
  Upload(sh, s, src, bytes, flags, flag_bytes, s.h_flags, s.d_flags.get());
}

void KernelBegin(Shared& sh, Lane& lane, Slot& s) {
  if (lane.last_kernel) sh.Call(cudaStreamWaitEvent(s.s(), lane.last_kernel, 0), "cudaStreamWaitEvent");
  sh.Call(cudaEventRecord(s.kernel_start.get(), s.s()), "cudaEventRecord");
}

void KernelEnd(Shared& sh, Lane& lane, Slot& s) {
  sh.Call(cudaGetLastError(), "kernel launch");
  sh.Call(cudaEventRecord(s.kernel_done.get(), s.s()), "cudaEventRecord");
  lane.last_kernel = s.kernel_done.get();
}

void Download(Shared& sh, Slot& s, char* dst, size_t bytes) {
  const bool direct = bytes && sh.Pinned(dst, bytes);  // registered: no copy out of staging
  if (bytes) {
    sh.Call(cudaMemcpyAsync(direct ? dst : s.h_out.get(), s.d_out.get(), bytes, cudaMemcpyDeviceToHost, s.s()),
            "D2H");
  }
  sh.Call(cudaEventRecord(s.d2h_done.get(), s.s()), "cudaEventRecord");
  s.busy = true;
  s.downloads = true;
  s.out_dst = dst;
  s.out_bytes = direct ? 0 : bytes;
}

// Waits for the slot's sub-chunk, hands its result over and adds its stage times.
void Retire(Shared& sh, Slot& s, StageTimes& times) {
  if (!s.busy) return;
  cudaEvent_t done = s.downloads ? s.d2h_done.get() : s.kernel_done.get();
  sh.Call(cudaEventSynchronize(done), "cudaEventSynchronize");
  if (s.out_bytes) std::memcpy(s.out_dst, s.h_out.get(), s.out_bytes);
  times.h2d_us += ElapsedUs(s.start.get(), s.h2d_done.get());
  times.kernel_us += ElapsedUs(s.kernel_start.get(), s.kernel_done.get());
  if (s.downloads) times.d2h_us += ElapsedUs(s.kernel_done.get(), s.d2h_done.get());
  s.busy = false;
  s.ticket = 0;
  s.downloads = false;
  s.out_bytes = 0;
}

// Elements of T per sub-chunk, when each also brings key_size bytes of keys (0: none).
template <class T>
uint64_t SubChunkElements(size_t key_size = 0) {
  const uint64_t sub = kSubChunkBytes / sizeof(T);
  return key_size ? std::min<uint64_t>(sub, kIndexBytes / key_size) : sub;
}

// Streams n elements of T through the lane's two slots: sub-chunk k+1's upload overlaps
// sub-chunk k's kernel and download. launch(slot, m) enqueues the kernel on slot.s() reading
// slot.d_in and (when out is non-null) writing slot.d_out, which is copied to out. With `keys`
// (key_size bytes per element), each sub-chunk's keys go to slot.d_idx (compaction's index
// buffers, which nothing else uses).
template <class T, class Launch>
void RunPipelined(Shared& sh, Lane& lane, const void* in, void* out, uint64_t n, StageTimes& times,
                  Launch launch, const void* keys = nullptr, size_t key_size = 0) {
  const uint64_t sub = SubChunkElements<T>(keys ? key_size : 0);
  const char* key_src = static_cast<const char*>(keys);
  const char* src = static_cast<const char*>(in);
  char* dst = static_cast<char*>(out);
  unsigned k = 0;
  for (uint64_t off = 0; off < n; off += sub, ++k) {
    const uint64_t m = std::min(sub, n - off);
    Slot& s = lane.slots[k & 1];
    Retire(sh, s, times);
    Upload(sh, s, src + off * sizeof(T), m * sizeof(T), keys ? key_src + off * key_size : nullptr, m * key_size,
           s.h_idx, s.d_idx.get());
    KernelBegin(sh, lane, s);
    launch(s, m);
    KernelEnd(sh, lane, s);
    if (dst) {
      Download(sh, s, dst + off * sizeof(T), m * sizeof(T));
    } else {
      s.busy = true;  // retired on its kernel's completion
    }
  }
  Retire(sh, lane.slots[0], times);
  Retire(sh, lane.slots[1], times);
}

// The stage times of a call run one step at a time on `s`'s stream (upload, kernels, download;
// not RunPipelined's sub-chunks), once its events have completed: start -> h2d_done -> kernel_done
// -> d2h_done.
void AddStepTimes(Slot& s, StageTimes& times) {
  times.h2d_us += ElapsedUs(s.start.get(), s.h2d_done.get());
  times.kernel_us += ElapsedUs(s.h2d_done.get(), s.kernel_done.get());
  times.d2h_us += ElapsedUs(s.kernel_done.get(), s.d2h_done.get());
}

// A session's running carry, on the device, from the pool.
template <class T>
class DeviceCarry {
 public:
  // Allocates on first use, in `stream`'s order. A few bytes per session: not counted against
  // --device-memory-limit, which bounds the lanes and temporary storage.
  T* get(cudaStream_t stream) {
    if (!buffer_.get()) buffer_ = cuda::DeviceBuffer(sizeof(T), stream);
    return ptr();
  }
  T* ptr() const { return static_cast<T*>(buffer_.get()); }
  bool valid = false;  // holds the combination of everything processed so far

 private:
  cuda::DeviceBuffer buffer_;
};

class DeviceGuard {
 public:
  explicit DeviceGuard(Shared& sh) { sh.Call(cudaSetDevice(sh.device), "cudaSetDevice"); }
};

kernels::ScanAlgorithm ToKernels(ScanAlgorithm a) {
  switch (a) {
    case ScanAlgorithm::kDefault:
    case ScanAlgorithm::kDecoupledLookback: return kernels::ScanAlgorithm::kDecoupledLookback;
    case ScanAlgorithm::kChained: return kernels::ScanAlgorithm::kChained;
    case ScanAlgorithm::kReduceThenScan: return kernels::ScanAlgorithm::kReduceThenScan;
    case ScanAlgorithm::kKoggeStone: return kernels::ScanAlgorithm::kKoggeStone;
    case ScanAlgorithm::kBrentKung: return kernels::ScanAlgorithm::kBrentKung;
    case ScanAlgorithm::kBlelloch: return kernels::ScanAlgorithm::kBlelloch;
    case ScanAlgorithm::kHillisSteele: return kernels::ScanAlgorithm::kHillisSteele;
    case ScanAlgorithm::kCub: return kernels::ScanAlgorithm::kCub;
    case ScanAlgorithm::kDeterministic: return kernels::ScanAlgorithm::kDecoupledLookback;  // exact pairs
    case ScanAlgorithm::kCpuBlocked: break;
  }
  throw Error(ErrorCode::kUnimplemented, "scan algorithm '" + std::string(Name(a)) +
                                             "' is not available on the cuda engine");
}

// Integer scans under the default algorithm whose leading chunks are small run those chunks on
// the host: for a few KiB the GPU round trip (two copies, a launch, an event wait: ~50 us)
// costs more than the scan (~1 us a KiB). Integer operators are exact, so the bits are the
// GPU's. Once a chunk has gone to the device the carry lives there and every later chunk
// follows it; a host carry is uploaded before the first device chunk.
constexpr uint64_t kHostChunkBytes = 16 << 10;

template <class T, class Op>
class CudaScan final : public ScanSession {
 public:
  CudaScan(std::shared_ptr<Shared> sh, kernels::ScanAlgorithm algo, bool exclusive, bool host_small)
      : sh_(std::move(sh)), algo_(algo), exclusive_(exclusive), host_small_(host_small && std::is_integral_v<T>) {}

  ~CudaScan() override {
    if (held_) {  // chunks begun and never ended (the call failed): let the lane go idle first
      cudaSetDevice(sh_->device);
      (*held_)->Quiesce();
    }
  }

  void Process(const void* in, void* out, uint64_t n, StageTimes& times) override {
    if (n == 0) return;
    if (OnHost(n)) return HostScan(in, out, n, times);
    Shared& sh = *sh_;
    DeviceGuard guard(sh);
    // A chunk begun on the held lane is retired by RunPipelined before its slot is reused.
    std::optional<LaneLease> own;
    Lane& lane = held_ ? **held_ : *own.emplace(sh);
    for (Slot& s : lane.slots) Retire(sh, s, times);  // a begun chunk, before temp storage may move
    PrepareTemp(lane, std::min<uint64_t>(n, kSubChunkBytes / sizeof(T)));
    RunPipelined<T>(sh, lane, in, out, n, times, [&](Slot& s, uint64_t m) { Launch(lane, s, m); });
    held_.reset();  // both slots retired
  }

  // Pipelined: a chunk of at most one sub-chunk takes the next slot of a lane held while chunks
  // are in flight, so its copies and kernel overlap the caller's work on the chunk before.
  // End(k) may run on another thread during Begin(k+1): they use different slots, and mu_
  // guards which slots are taken and the held lane.
  uint64_t Begin(const void* in, void* out, uint64_t n, StageTimes& times) override {
    if (n == 0) return 0;
    if (OnHost(n)) {
      HostScan(in, out, n, times);
      return 0;
    }
    if (n * sizeof(T) > kSubChunkBytes) {
      Process(in, out, n, times);
      return 0;
    }
    Shared& sh = *sh_;
    DeviceGuard guard(sh);
    Lane* lane = nullptr;
    Slot* s = nullptr;
    uint64_t ticket = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!held_) {
        // Temporary storage for any chunk this pipeline may take, while none is in flight.
        PrepareTemp(*held_.emplace(sh), kSubChunkBytes / sizeof(T));
      }
      lane = &**held_;
      s = &lane->slots[next_slot_];
      if (s->busy) Retire(sh, *s, times);  // only when the caller ended nothing in between
      s->busy = true;                      // taken: End of the other slot keeps the lane
      s->ticket = ticket = ++tickets_;
      next_slot_ ^= 1;
    }
    Upload(sh, *s, in, n * sizeof(T), nullptr, 0);
    KernelBegin(sh, *lane, *s);
    Launch(*lane, *s, n);
    KernelEnd(sh, *lane, *s);
    Download(sh, *s, static_cast<char*>(out), n * sizeof(T));
    return ticket;
  }

  void End(uint64_t ticket, StageTimes& times) override {
    if (ticket == 0) return;
    Shared& sh = *sh_;
    DeviceGuard guard(sh);
    Slot* s = nullptr;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!held_) return;
      for (Slot& slot : (*held_)->slots) {
        if (slot.busy && slot.ticket == ticket) s = &slot;
      }
    }
    if (s) Retire(sh, *s, times);  // waits and copies out, unlocked: Begin may fill the other slot
    std::lock_guard<std::mutex> lock(mu_);
    if (held_ && !(*held_)->slots[0].busy && !(*held_)->slots[1].busy) held_.reset();  // give the lane back
  }

  uint64_t overlap_elements() const override { return kSubChunkBytes / sizeof(T); }
  bool on_host(uint64_t n) const override { return n == 0 || (n * sizeof(T) <= kSmallChunkBytes && OnHost(n)); }

  std::string algorithm() const override { return kernels::ScanAlgorithmName(algo_); }
  // Staged through pinned memory: a range of `out` is written only after the same range of
  // `in` was copied to the device (RunPipelined retires sub-chunk k-2 after uploading k).
  bool in_place() const override { return true; }

 private:
  bool OnHost(uint64_t n) const { return host_small_ && !carry_.valid && n * sizeof(T) <= kHostChunkBytes; }

  // The sequential scan of n elements (raw bytes, may alias), continuing the host carry; its
  // time counts as kernel time. Integer operators: starting from the identity is exact.
  void HostScan(const void* in, void* out, uint64_t n, StageTimes& times) {
    host::KernelTimer timer(times);
    const auto* src = static_cast<const unsigned char*>(in);
    auto* dst = static_cast<unsigned char*>(out);
    host_carry_ = exclusive_ ? host::ScanRange<T, Op, true>(src, dst, 0, n, host_carry_)
                             : host::ScanRange<T, Op, false>(src, dst, 0, n, host_carry_);
    host_has_ = true;
  }

  // Enqueues the scan of slot s's m elements on its stream, continuing the device carry (the
  // host's, uploaded first, after chunks scanned on the host).
  void Launch(Lane& lane, Slot& s, uint64_t m) {
    Shared& sh = *sh_;
    T* carry = carry_.get(s.s());
    if (host_has_ && !carry_.valid) {
      // Pageable source: staged before this returns; host_carry_ no longer changes anyway.
      sh.Call(cudaMemcpyAsync(carry, &host_carry_, sizeof(T), cudaMemcpyHostToDevice, s.s()), "H2D scan carry");
      carry_.valid = true;
    }
    size_t bytes = lane.temp.size();
    sh.Call(kernels::Scan<T, Op>(algo_, lane.temp.get(), bytes, static_cast<const T*>(s.d_in.get()),
                                    static_cast<T*>(s.d_out.get()), m, exclusive_, carry_.valid ? carry : nullptr,
                                    carry, s.s()),
            "scan kernel");
    carry_.valid = true;
  }

  // Grows the lane's temporary storage for scans of up to m elements. Growing waits for the
  // lane (Quiesce): call it only with no chunk in flight.
  void PrepareTemp(Lane& lane, uint64_t m) {
    size_t temp_bytes = 0;
    sh_->Call(kernels::Scan<T, Op>(algo_, nullptr, temp_bytes, nullptr, nullptr, m, exclusive_, nullptr, nullptr,
                                      lane.slots[0].s()),
              "scan temp size");
    lane.EnsureTemp(temp_bytes);
  }

  std::shared_ptr<Shared> sh_;
  kernels::ScanAlgorithm algo_;
  bool exclusive_;
  bool host_small_;  // leading chunks of up to kHostChunkBytes on the host
  T host_carry_ = Op::identity();
  bool host_has_ = false;  // chunks were scanned on the host: the device starts from host_carry_
  DeviceCarry<T> carry_;
  std::mutex mu_;
  uint64_t tickets_ = 0;
  unsigned next_slot_ = 0;
  std::optional<LaneLease> held_;  // last: released before the carry goes
};

template <class T, class Op>
class CudaReduce final : public ReduceSession {
 public:
  explicit CudaReduce(std::shared_ptr<Shared> sh) : sh_(std::move(sh)) {}

  void Process(const void* in, uint64_t n, StageTimes& times) override {
    if (n == 0) return;
    Shared& sh = *sh_;
    DeviceGuard guard(sh);
    LaneLease lane(sh);
    const uint64_t sub = kSubChunkBytes / sizeof(T);
    size_t temp_bytes = 0;
    sh.Call(kernels::Reduce<T, Op>(false, nullptr, temp_bytes, nullptr, std::min(n, sub), nullptr, nullptr,
                                   lane->slots[0].s()),
            "reduce temp size");
    lane->EnsureTemp(temp_bytes);
    T* carry = carry_.get(lane->slots[0].s());
    RunPipelined<T>(sh, *lane, in, nullptr, n, times, [&](Slot& s, uint64_t m) {
      size_t bytes = lane->temp.size();
      sh.Call(kernels::Reduce<T, Op>(false, lane->temp.get(), bytes, static_cast<const T*>(s.d_in.get()), m,
                                     carry_.valid ? carry : nullptr, carry, s.s()),
              "reduce kernel");
      carry_.valid = true;
    });
  }

  void Result(void* value) const override {
    T v = Op::identity();
    if (carry_.valid) {
      DeviceGuard guard(*sh_);
      sh_->Call(cudaMemcpy(&v, carry_.ptr(), sizeof(T), cudaMemcpyDeviceToHost),
                "D2H result");
    }
    std::memcpy(value, &v, sizeof(T));
  }

  std::string algorithm() const override { return "one_pass"; }

 private:
  std::shared_ptr<Shared> sh_;
  DeviceCarry<T> carry_;
};

// ---------------------------------------------------------------------------------------------
// Deterministic float SUM / PRODUCT (issue 11): the canonical tree of canonical_tree.h. The
// partial tiles at a chunk's edges (< 4096 elements each) are computed on the host with the
// CPU engine's code; the whole tiles between them on the device (kernels::CanonicalScan), with
// the tree state uploaded before and read back after. Both compute the same operations, so
// the bits do not depend on where a tile ran.

// Runs `tiles` whole tiles through the lane's pipeline (sub-chunks are whole tiles too:
// kSubChunkBytes / sizeof(T) is a multiple of 4096), continuing and then updating `state`.
// dst == nullptr: a reduction (aggregates only).
template <class T, class Op>
void RunCanonicalTiles(Shared& sh, cuda::DeviceBuffer& d_state, canon::TreeState<T, Op>& state, const void* src,
                       void* dst, uint64_t tiles, bool exclusive, StageTimes& times) {
  static_assert((kSubChunkBytes / sizeof(T)) % canon::kTileItems == 0, "sub-chunks must be whole tiles");
  DeviceGuard guard(sh);
  LaneLease lane(sh);
  cudaStream_t s0 = lane->slots[0].s();
  const uint64_t sub_tiles = kSubChunkBytes / sizeof(T) / canon::kTileItems;
  size_t temp_bytes = 0;
  sh.Call(kernels::CanonicalScan<T, Op>(nullptr, temp_bytes, nullptr, nullptr, std::min(tiles, sub_tiles), 0,
                                        exclusive, nullptr, s0),
          "canonical scan temp size");
  lane->EnsureTemp(temp_bytes);
  using DevState = kernels::CanonicalState<T>;
  if (!d_state.get()) d_state = cuda::DeviceBuffer(sizeof(DevState), s0);
  auto* dev = static_cast<DevState*>(d_state.get());
  DevState h{};
  std::memcpy(h.aggs, state.aggs, sizeof(h.aggs));
  h.carry = state.carry.value;
  h.has_carry = state.carry.has ? 1 : 0;
  // Pageable source: returns once staged, so `h` may change afterwards. Slot 0 runs the first
  // kernel, which is thereby ordered after this.
  sh.Call(cudaMemcpyAsync(dev, &h, sizeof(h), cudaMemcpyHostToDevice, s0), "H2D canonical state");
  uint64_t done = 0;
  RunPipelined<T>(sh, *lane, src, dst, tiles * canon::kTileItems, times, [&](Slot& s, uint64_t m) {
    const uint64_t t = m / canon::kTileItems;
    size_t bytes = lane->temp.size();
    sh.Call(kernels::CanonicalScan<T, Op>(lane->temp.get(), bytes, static_cast<const T*>(s.d_in.get()),
                                          dst ? static_cast<T*>(s.d_out.get()) : nullptr, t, state.tiles + done,
                                          exclusive, dev, s.s()),
            "canonical scan kernel");
    done += t;
  });
  if (lane->last_kernel) sh.Call(cudaStreamWaitEvent(s0, lane->last_kernel, 0), "cudaStreamWaitEvent");
  sh.Call(cudaMemcpyAsync(&h, dev, sizeof(h), cudaMemcpyDeviceToHost, s0), "D2H canonical state");
  sh.Call(cudaStreamSynchronize(s0), "cudaStreamSynchronize");
  std::memcpy(state.aggs, h.aggs, sizeof(h.aggs));
  state.carry = {h.has_carry != 0, h.carry};
  state.tiles += tiles;
}

template <class T, class Op, bool kExclusive>
class CudaTreeScan final : public ScanSession {
 public:
  explicit CudaTreeScan(std::shared_ptr<Shared> sh) : sh_(std::move(sh)) {}

  void Process(const void* in, void* out, uint64_t n, StageTimes& times) override {
    if (n == 0) return;
    const auto* src = static_cast<const unsigned char*>(in);
    auto* dst = static_cast<unsigned char*>(out);
    // The edge tiles' host time counts as kernel time; the whole tiles' device stages are
    // added by RunPipelined, so their wall time is taken out.
    uint64_t device_us = 0;
    const auto start = std::chrono::steady_clock::now();
    canon::ScanChunk<T, Op>(cur_, src, dst, n, kExclusive,
                            [&](const unsigned char* s, unsigned char* d, uint64_t tiles) {
                              const auto t0 = std::chrono::steady_clock::now();
                              RunCanonicalTiles<T, Op>(*sh_, d_state_, cur_.state, s, d, tiles, kExclusive, times);
                              device_us += static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(
                                                                     std::chrono::steady_clock::now() - t0)
                                                                     .count());
                            });
    const auto all_us = static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - start).count());
    times.kernel_us += all_us > device_us ? all_us - device_us : 0;  // host-computed edge tiles
  }

  std::string algorithm() const override { return "deterministic"; }
  // Small and within the partial tile: ScanChunk runs no whole tile on the device.
  bool on_host(uint64_t n) const override {
    if (n * sizeof(T) > kSmallChunkBytes) return false;
    const uint64_t fill = cur_.left_n > 0 ? std::min<uint64_t>(n, canon::kTileItems - cur_.left_n) : 0;
    return (n - fill) < canon::kTileItems;
  }

 private:
  std::shared_ptr<Shared> sh_;
  canon::Cursor<T, Op> cur_;
  cuda::DeviceBuffer d_state_;
};

template <class T, class Op>
class CudaTreeReduce final : public ReduceSession {
 public:
  explicit CudaTreeReduce(std::shared_ptr<Shared> sh) : sh_(std::move(sh)) {}

  void Process(const void* in, uint64_t n, StageTimes& times) override {
    if (n == 0) return;
    canon::ReduceChunk<T, Op>(cur_, static_cast<const unsigned char*>(in), n,
                              [&](const unsigned char* s, uint64_t tiles) {
                                RunCanonicalTiles<T, Op>(*sh_, d_state_, cur_.state, s, nullptr, tiles, false, times);
                              });
  }

  void Result(void* value) const override {
    const T v = canon::ReduceResult(cur_);
    std::memcpy(value, &v, sizeof(T));
  }
  std::string algorithm() const override { return "deterministic"; }

 private:
  std::shared_ptr<Shared> sh_;
  canon::Cursor<T, Op> cur_;
  cuda::DeviceBuffer d_state_;
};

// ---------------------------------------------------------------------------------------------
// Segmented scan (exact operators): values and keys go up side by side, kernels::SegmentedScan
// forms the segment heads on the device and scans in one pass, the carry (last value and key)
// stays on the device between sub-chunks and calls.

template <class T, class Op>
class CudaSegmentedScan final : public SegmentedScanSession {
 public:
  CudaSegmentedScan(std::shared_ptr<Shared> sh, const SegmentedScanSpec& spec)
      : sh_(std::move(sh)), spec_(spec), key_size_(SegmentKeyBytes(spec)) {}

  void Process(const void* values, const void* keys, void* out, uint64_t n, StageTimes& times) override {
    if (n == 0) return;
    if (values == nullptr || keys == nullptr || out == nullptr) {
      throw Error(ErrorCode::kInvalidArgument, "null segmented scan buffer");
    }
    Shared& sh = *sh_;
    DeviceGuard guard(sh);
    LaneLease lane(sh);
    size_t temp_bytes = 0;
    sh.Call(Run(nullptr, temp_bytes, nullptr, nullptr, nullptr, std::min(n, SubChunkElements<T>(key_size_)), nullptr,
                nullptr, lane->slots[0].s()),
            "segmented scan temp size");
    lane->EnsureTemp(temp_bytes);
    RunPipelined<T>(
        sh, *lane, values, out, n, times,
        [&](Slot& s, uint64_t m) {
          auto* carry = carry_.get(s.s());
          size_t bytes = lane->temp.size();
          sh.Call(Run(lane->temp.get(), bytes, static_cast<const T*>(s.d_in.get()), s.d_idx.get(),
                      static_cast<T*>(s.d_out.get()), m, carry_.valid ? carry : nullptr, carry, s.s()),
                  "segmented scan kernel");
          carry_.valid = true;
        },
        keys, key_size_);
  }

  std::string algorithm() const override { return "segmented_single_pass"; }

 private:
  using Carry = kernels::SegmentCarry<T>;
  // The kernel for the spec's kind of key: head bytes, or 4- or 8-byte key bits.
  cudaError_t Run(void* temp, size_t& bytes, const T* in, const void* keys, T* out, uint64_t n, const Carry* carry_in,
                  Carry* carry_out, cudaStream_t stream) const {
    auto run = [&](auto key) {
      using K = decltype(key);
      return kernels::SegmentedScan<T, Op, K>(temp, bytes, in, static_cast<const K*>(keys), out, n, spec_.exclusive,
                                              carry_in, carry_out, stream);
    };
    if (spec_.heads) return run(uint8_t{});
    return key_size_ == 4 ? run(uint32_t{}) : run(uint64_t{});
  }

  std::shared_ptr<Shared> sh_;
  SegmentedScanSpec spec_;
  size_t key_size_;
  DeviceCarry<Carry> carry_;
};

// ---------------------------------------------------------------------------------------------
// Reduce by key of 4-byte values (kernels::ReduceByKey): each sub-chunk's values and keys go up,
// the kernel writes the runs that close inside it, and only those come back. The run open at a
// sub-chunk's end lives in the device carry; the host keeps a copy of it (read with the run
// count after each sub-chunk) to emit it when the next key differs, or at Finish. One
// sub-chunk at a time: its run count decides what to copy back.

template <class T, class Op>
class CudaReduceByKey final : public ReduceByKeySession {
 public:
  CudaReduceByKey(std::shared_ptr<Shared> sh, const SegmentedScanSpec& spec)
      : sh_(std::move(sh)), key_size_(SizeOf(spec.key_dtype)) {
    if (IsFloat(spec.key_dtype)) {
      throw Error(ErrorCode::kInvalidArgument,
                  "segment keys must be an integer dtype, not " + std::string(Name(spec.key_dtype)));
    }
  }

  uint64_t Process(const void* values, const void* keys, uint64_t n, std::string* keys_out, std::string* values_out,
                   StageTimes& times) override {
    if (n == 0) return 0;
    Shared& sh = *sh_;
    DeviceGuard guard(sh);
    LaneLease lane(sh);
    // The runs of a sub-chunk (at most one per element) come back through d_out: values, then
    // keys from the next 16-byte boundary (8-byte keys must be aligned).
    const uint64_t sub = (kSubChunkBytes - 16) / (sizeof(T) + key_size_);
    size_t temp_bytes = 0;
    sh.Call(Run(nullptr, temp_bytes, nullptr, nullptr, nullptr, nullptr, std::min(n, sub), nullptr, nullptr, nullptr),
            "reduce by key temp size");
    lane->EnsureTemp(temp_bytes);
    Slot& s = lane->slots[0];
    const auto* v = static_cast<const char*>(values);
    const auto* k = static_cast<const char*>(keys);
    auto* carry = carry_.get(s.s());
    uint64_t runs_total = 0;
    for (uint64_t off = 0; off < n; off += sub) {
      const uint64_t m = std::min(sub, n - off);
      // The open run closed before this sub-chunk when its first key differs.
      if (host_carry_.started && !SameKey(k + off * key_size_, host_carry_.last_key)) {
        runs_total += Emit(keys_out, values_out);
      }
      Upload(sh, s, v + off * sizeof(T), m * sizeof(T), k + off * key_size_, m * key_size_, s.h_idx, s.d_idx.get());
      KernelBegin(sh, *lane, s);
      auto* out_values = static_cast<T*>(s.d_out.get());
      const size_t keys_at = (m * sizeof(T) + 15) / 16 * 16;
      auto* out_keys = static_cast<char*>(s.d_out.get()) + keys_at;
      size_t bytes = lane->temp.size();
      sh.Call(Run(lane->temp.get(), bytes, static_cast<const T*>(s.d_in.get()), s.d_idx.get(), out_keys, out_values, m,
                  carry_.valid ? carry : nullptr, carry, s.s()),
              "reduce by key kernel");
      carry_.valid = true;
      KernelEnd(sh, *lane, s);
      sh.Call(cudaMemcpyAsync(s.h_out.get(), carry, sizeof(Carry), cudaMemcpyDeviceToHost, s.s()),
              "D2H run count and carry");
      sh.Call(cudaStreamSynchronize(s.s()), "cudaStreamSynchronize");
      std::memcpy(&host_carry_, s.h_out.get(), sizeof(Carry));
      const uint64_t runs = host_carry_.runs;
      if (runs > m) sh.Call(cudaErrorIllegalState, "reduce by key kernel reported more runs than elements");
      if (runs) {
        const size_t vbytes = runs * sizeof(T), kbytes = runs * key_size_;
        sh.Call(cudaMemcpyAsync(s.h_out.get(), out_values, vbytes, cudaMemcpyDeviceToHost, s.s()), "D2H run values");
        sh.Call(cudaMemcpyAsync(static_cast<char*>(s.h_out.get()) + keys_at, out_keys, kbytes, cudaMemcpyDeviceToHost,
                                s.s()),
                "D2H run keys");
      }
      sh.Call(cudaEventRecord(s.d2h_done.get(), s.s()), "cudaEventRecord");
      s.busy = true;
      s.downloads = true;
      Retire(sh, s, times);
      if (runs) {
        const auto* h = static_cast<const char*>(s.h_out.get());
        values_out->append(h, runs * sizeof(T));
        keys_out->append(h + keys_at, runs * key_size_);
      }
      runs_total += runs;
    }
    return runs_total;
  }

  uint64_t Finish(std::string* keys_out, std::string* values_out) override {
    return host_carry_.started ? Emit(keys_out, values_out) : 0;
  }
  std::string algorithm() const override { return "reduce_by_key_single_pass"; }

 private:
  using Carry = kernels::RunCarry<T>;

  bool SameKey(const char* key, uint64_t bits) const {
    uint64_t k = 0;
    std::memcpy(&k, key, key_size_);  // little-endian: the low bytes
    return k == bits;
  }
  // Appends the open run (the host's copy of the carry) and closes it.
  uint64_t Emit(std::string* keys_out, std::string* values_out) {
    keys_out->append(reinterpret_cast<const char*>(&host_carry_.last_key), key_size_);
    values_out->append(reinterpret_cast<const char*>(&host_carry_.value), sizeof(T));
    host_carry_.started = 0;
    return 1;
  }
  cudaError_t Run(void* temp, size_t& bytes, const T* in, const void* keys, void* keys_out, T* values_out, uint64_t n,
                  const Carry* carry_in, Carry* carry_out, cudaStream_t stream) const {
    auto run = [&](auto key) {
      using K = decltype(key);
      return kernels::ReduceByKey<T, Op, K>(temp, bytes, in, static_cast<const K*>(keys), static_cast<K*>(keys_out),
                                            values_out, n, false, carry_in, carry_out, stream);
    };
    return key_size_ == 4 ? run(uint32_t{}) : run(uint64_t{});
  }

  std::shared_ptr<Shared> sh_;
  size_t key_size_;
  DeviceCarry<Carry> carry_;
  Carry host_carry_{};  // started == 0: no run open
};

// A segmented scan run on the host (see CudaEngine::NewSegmentedScan), named as such.
class HostSegmentedScan final : public SegmentedScanSession {
 public:
  explicit HostSegmentedScan(std::unique_ptr<SegmentedScanSession> s) : s_(std::move(s)) {}
  void Process(const void* values, const void* keys, void* out, uint64_t n, StageTimes& t) override {
    s_->Process(values, keys, out, n, t);
  }
  std::string algorithm() const override { return s_->algorithm() + "_host"; }

 private:
  std::unique_ptr<SegmentedScanSession> s_;
};

template <class T>
kernels::Predicate<T> ToKernels(const Predicate& p) {
  kernels::Predicate<T> out;
  out.op = static_cast<kernels::PredicateOp>(static_cast<int>(p.op));
  std::memcpy(&out.threshold, p.threshold, sizeof(T));
  std::memcpy(&out.upper, p.upper, sizeof(T));
  return out;
}

template <class T>
class CudaCompact final : public CompactSession {
 public:
  CudaCompact(std::shared_ptr<Shared> sh, const CompactSpec& spec)
      : sh_(std::move(sh)), spec_(spec), pred_(ToKernels<T>(spec.predicate)) {}

  // Each sub-chunk runs to completion before the next: how many were kept must be known
  // before the kept values can be copied out.
  uint64_t Process(const void* values, const uint8_t* flags, uint64_t n, void* out_values, int64_t* out_indices,
                   StageTimes& times) override {
    if (n == 0) return 0;
    Shared& sh = *sh_;
    DeviceGuard guard(sh);
    LaneLease lane(sh);
    const uint64_t sub = kSubChunkBytes / sizeof(T);
    size_t temp_bytes = 0;
    sh.Call(kernels::Compact<T>(false, nullptr, temp_bytes, nullptr, nullptr, pred_, std::min(n, sub), 0, nullptr,
                                nullptr, nullptr, lane->slots[0].s()),
            "compact temp size");
    lane->EnsureTemp(temp_bytes);
    const char* src = static_cast<const char*>(values);
    uint64_t kept_total = 0;
    Slot& s = lane->slots[0];
    for (uint64_t off = 0; off < n; off += sub) {
      const uint64_t m = std::min(sub, n - off);
      Upload(sh, s, src + off * sizeof(T), m * sizeof(T), spec_.use_flags ? flags + off : nullptr, m);
      KernelBegin(sh, *lane, s);
      size_t bytes = lane->temp.size();
      sh.Call(kernels::Compact<T>(false, lane->temp.get(), bytes, static_cast<const T*>(s.d_in.get()),
                                  spec_.use_flags ? static_cast<const uint8_t*>(s.d_flags.get()) : nullptr, pred_, m,
                                  static_cast<int64_t>(processed_ + off),
                                  spec_.want_values ? static_cast<T*>(s.d_out.get()) : nullptr,
                                  spec_.want_indices ? static_cast<int64_t*>(s.d_idx.get()) : nullptr,
                                  static_cast<uint64_t*>(s.d_count.get()), s.s()),
              "compact kernel");
      KernelEnd(sh, *lane, s);
      sh.Call(cudaMemcpyAsync(s.h_count.get(), s.d_count.get(), sizeof(uint64_t), cudaMemcpyDeviceToHost, s.s()),
              "D2H kept count");
      sh.Call(cudaStreamSynchronize(s.s()), "cudaStreamSynchronize");
      uint64_t kept = 0;
      std::memcpy(&kept, s.h_count.get(), sizeof(kept));
      if (kept > m) sh.Call(cudaErrorIllegalState, "compact kernel reported more kept than it was given");
      if (spec_.want_values && kept) {
        sh.Call(cudaMemcpyAsync(s.h_out.get(), s.d_out.get(), kept * sizeof(T), cudaMemcpyDeviceToHost, s.s()),
                "D2H kept values");
      }
      if (spec_.want_indices && kept) {
        sh.Call(cudaMemcpyAsync(s.h_idx.get(), s.d_idx.get(), kept * sizeof(int64_t), cudaMemcpyDeviceToHost, s.s()),
                "D2H kept indices");
      }
      sh.Call(cudaEventRecord(s.d2h_done.get(), s.s()), "cudaEventRecord");
      s.busy = true;
      s.downloads = true;
      Retire(sh, s, times);
      if (spec_.want_values) {
        std::memcpy(static_cast<char*>(out_values) + kept_total * sizeof(T), s.h_out.get(), kept * sizeof(T));
      }
      if (spec_.want_indices) std::memcpy(out_indices + kept_total, s.h_idx.get(), kept * sizeof(int64_t));
      kept_total += kept;
    }
    processed_ += n;
    return kept_total;
  }

  std::string algorithm() const override { return "single_pass"; }

 private:
  std::shared_ptr<Shared> sh_;
  CompactSpec spec_;
  kernels::Predicate<T> pred_;
  uint64_t processed_ = 0;
};

// ---------------------------------------------------------------------------------------------
// Histogram: the counters (bins, below, above, NaN) stay on the device for the whole call; every
// sub-chunk's kernel adds to them, and Result reads them once.

template <class T>
class CudaHistogram final : public HistogramSession {
 public:
  CudaHistogram(std::shared_ptr<Shared> sh, const HistogramSpec& spec)
      : sh_(std::move(sh)), edges_(spec.edges),
        bins_(hist::MakeBins(edges_.data(), static_cast<uint32_t>(edges_.size() - 1), spec.even)),
        slots_(edges_.size() - 1 + hist::kExtraSlots) {}

  void Process(const void* in, uint64_t n, StageTimes& times) override {
    if (n == 0) return;
    Shared& sh = *sh_;
    DeviceGuard guard(sh);
    LaneLease lane(sh);
    if (!d_counts_.get()) {  // first chunk: edges up, counters zeroed, in the first kernel's stream
      cudaStream_t s0 = lane->slots[0].s();
      d_edges_ = cuda::DeviceBuffer(edges_.size() * sizeof(double), s0);
      d_counts_ = cuda::DeviceBuffer(slots_ * sizeof(unsigned long long), s0);
      sh.Call(cudaMemcpyAsync(d_edges_.get(), edges_.data(), edges_.size() * sizeof(double), cudaMemcpyHostToDevice,
                              s0),
              "H2D histogram edges");
      sh.Call(cudaMemsetAsync(d_counts_.get(), 0, slots_ * sizeof(unsigned long long), s0), "histogram counters");
      bins_.edges = static_cast<const double*>(d_edges_.get());
    }
    auto* counts = static_cast<unsigned long long*>(d_counts_.get());
    RunPipelined<T>(sh, *lane, in, nullptr, n, times, [&](Slot& s, uint64_t m) {
      sh.Call(kernels::Histogram<T>(static_cast<const T*>(s.d_in.get()), m, bins_, counts, s.s()), "histogram kernel");
    });
  }

  std::vector<uint64_t> Result() const override {
    std::vector<uint64_t> counts(slots_);
    if (d_counts_.get()) {
      DeviceGuard guard(*sh_);
      sh_->Call(cudaMemcpy(counts.data(), d_counts_.get(), slots_ * sizeof(uint64_t), cudaMemcpyDeviceToHost),
                "D2H histogram counts");
    }
    return counts;
  }
  std::string algorithm() const override { return "shared_atomics"; }

 private:
  std::shared_ptr<Shared> sh_;
  std::vector<double> edges_;
  hist::Bins bins_;  // edges: device memory once the first chunk came
  size_t slots_;
  cuda::DeviceBuffer d_edges_;
  cuda::DeviceBuffer d_counts_;
};

// ---------------------------------------------------------------------------------------------
// 2-D scan: each call's whole rows go up, through kernels::Scan2D (one pass, the carry row on
// the device between calls), and back. One step at a time: the wire, not PCIe, paces a call.

template <class T, class Op>
class CudaScan2D final : public Scan2DSession {
 public:
  CudaScan2D(std::shared_ptr<Shared> sh, uint64_t cols) : sh_(std::move(sh)), cols_(cols) {}

  void Process(const void* in, void* out, uint64_t rows, StageTimes& times) override {
    if (rows == 0) return;
    Shared& sh = *sh_;
    DeviceGuard guard(sh);
    LaneLease lane(sh);
    Slot& slot = lane->slots[0];
    cudaStream_t s = slot.s();
    cuda::DeviceMemoryBudget* budget = lane->budget;
    const uint64_t bytes = rows * cols_ * sizeof(T), row_bytes = cols_ * sizeof(T);
    size_t temp_bytes = 0;
    sh.Call(kernels::Scan2D<T, Op>(nullptr, temp_bytes, nullptr, nullptr, rows, cols_, nullptr, s), "scan2d temp size");
    cuda::DeviceBuffer d_in(bytes, s, budget), d_out(bytes, s, budget), d_temp(temp_bytes, s, budget);
    if (!carry_.get()) carry_ = cuda::DeviceBuffer(row_bytes, s, budget);
    sh.Call(cudaEventRecord(slot.start.get(), s), "cudaEventRecord");
    sh.Call(cudaMemcpyAsync(d_in.get(), in, bytes, cudaMemcpyHostToDevice, s), "H2D scan2d rows");
    sh.Call(cudaEventRecord(slot.h2d_done.get(), s), "cudaEventRecord");
    auto* d_out_t = static_cast<T*>(d_out.get());
    sh.Call(kernels::Scan2D<T, Op>(d_temp.get(), temp_bytes, static_cast<const T*>(d_in.get()), d_out_t, rows, cols_,
                                   has_carry_ ? static_cast<const T*>(carry_.get()) : nullptr, s),
            "scan2d kernel");
    sh.Call(cudaMemcpyAsync(carry_.get(), d_out_t + (rows - 1) * cols_, row_bytes, cudaMemcpyDeviceToDevice, s),
            "scan2d carry row");
    sh.Call(cudaEventRecord(slot.kernel_done.get(), s), "cudaEventRecord");
    sh.Call(cudaMemcpyAsync(out, d_out_t, bytes, cudaMemcpyDeviceToHost, s), "D2H scan2d rows");
    sh.Call(cudaEventRecord(slot.d2h_done.get(), s), "cudaEventRecord");
    sh.Call(cudaStreamSynchronize(s), "cudaStreamSynchronize");
    has_carry_ = true;
    AddStepTimes(slot, times);
  }
  std::string algorithm() const override { return "tile_wavefront"; }

 private:
  std::shared_ptr<Shared> sh_;
  uint64_t cols_;
  cuda::DeviceBuffer carry_;  // the last row of the table so far
  bool has_carry_ = false;
};

class CudaEngine final : public Engine {
 public:
  explicit CudaEngine(std::shared_ptr<Shared> sh) : sh_(std::move(sh)) {}

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

  std::unique_ptr<ScanSession> NewScan(const ScanSpec& spec) override {
    const kernels::ScanAlgorithm algo = ToKernels(spec.algorithm);
    return Visit(spec.dtype, spec.op, [&](auto t, auto op) -> std::unique_ptr<ScanSession> {
      using T = typename decltype(t)::type;
      using Op = typename decltype(op)::type;
      // Float SUM/PRODUCT: the canonical tree by default; a named algorithm runs as asked
      // (and its float bits may change from run to run and with the chunking).
      if constexpr (canon::kUsesTree<T, Op>) {
        if (spec.algorithm == ScanAlgorithm::kDefault || spec.algorithm == ScanAlgorithm::kDeterministic) {
          if (spec.exclusive) return std::make_unique<CudaTreeScan<T, Op, true>>(sh_);
          return std::make_unique<CudaTreeScan<T, Op, false>>(sh_);
        }
      }
      return std::make_unique<CudaScan<T, Op>>(sh_, algo, spec.exclusive,
                                               spec.algorithm == ScanAlgorithm::kDefault);
    });
  }
  std::unique_ptr<ReduceSession> NewReduce(const ReduceSpec& spec) override {
    return Visit(spec.dtype, spec.op, [&](auto t, auto op) -> std::unique_ptr<ReduceSession> {
      using T = typename decltype(t)::type;
      using Op = typename decltype(op)::type;
      if constexpr (canon::kUsesTree<T, Op>) return std::make_unique<CudaTreeReduce<T, Op>>(sh_);
      return std::make_unique<CudaReduce<T, Op>>(sh_);
    });
  }
  std::unique_ptr<CompactSession> NewCompact(const CompactSpec& spec) override {
    return VisitDType(spec.dtype, [&](auto t) -> std::unique_ptr<CompactSession> {
      using T = typename decltype(t)::type;
      return std::make_unique<CudaCompact<T>>(sh_, spec);
    });
  }
  // Exact operators: the fused single-pass kernel. Float32 SUM/PRODUCT: (head, value) pairs
  // packed on the host through the canonical tree on the device. float64 pairs (16 bytes) do not
  // fit the canonical kernels' static shared memory, so float64 SUM/PRODUCT run the same tree on
  // the host (the CPU engine's code; same bits), named "..._host" in Timing.
  std::unique_ptr<SegmentedScanSession> NewSegmentedScan(const SegmentedScanSpec& spec) override {
    return Visit(spec.dtype, spec.op, [&](auto t, auto o) -> std::unique_ptr<SegmentedScanSession> {
      using T = typename decltype(t)::type;
      using O = typename decltype(o)::type;
      if constexpr (canon::kUsesTree<T, O>) {
        if constexpr (sizeof(T) == 8) {
          return std::make_unique<HostSegmentedScan>(NewHostSegmentedScan(spec));
        } else {
          auto pairs = std::make_unique<CudaTreeScan<seg::SegItem<T>, seg::SegOp<T, O>, false>>(sh_);
          return std::make_unique<PairSegmentedScan<T, O>>(spec, std::move(pairs));
        }
      } else {
        return std::make_unique<CudaSegmentedScan<T, O>>(sh_, spec);
      }
    });
  }
  // 4-byte values under exact operators: the fused kernel. The rest: the runs picked out of the
  // segmented scan (Engine's default).
  std::unique_ptr<ReduceByKeySession> NewReduceByKey(const SegmentedScanSpec& spec) override {
    return Visit(spec.dtype, spec.op, [&](auto t, auto o) -> std::unique_ptr<ReduceByKeySession> {
      using T = typename decltype(t)::type;
      using O = typename decltype(o)::type;
      if constexpr (sizeof(T) == 4 && !canon::kUsesTree<T, O>) {
        return std::make_unique<CudaReduceByKey<T, O>>(sh_, spec);
      } else {
        return Engine::NewReduceByKey(spec);
      }
    });
  }
  std::unique_ptr<Scan2DSession> NewScan2D(const Scan2DSpec& spec) override {
    if (spec.cols == 0) throw Error(ErrorCode::kInvalidArgument, "a 2-D scan needs at least one column");
    return Visit(spec.dtype, spec.op, [&](auto t, auto o) -> std::unique_ptr<Scan2DSession> {
      return std::make_unique<CudaScan2D<typename decltype(t)::type, typename decltype(o)::type>>(sh_, spec.cols);
    });
  }
  // The whole array on the device (taken from the --device-memory-limit budget): keys up, coded
  // and radix-sorted (kernels::Sort, CUB's Onesweep), values gathered by the permutation, down.
  std::string Sort(const SortSpec& spec, const void* keys, const void* values, uint64_t n, void* keys_out,
                   void* values_out, int64_t* indices_out, StageTimes& times) override {
    if (n == 0) return "radix_sort";
    if (n > 0x7fffffffull) {  // CUB's radix sort counts items in an int
      throw Error(ErrorCode::kResourceExhausted, "the cuda engine sorts at most 2147483647 keys in one call, not " +
                                                     std::to_string(n) + " (lower --max-sort-bytes)");
    }
    Shared& sh = *sh_;
    DeviceGuard guard(sh);
    LaneLease lane(sh);
    Slot& slot = lane->slots[0];
    cudaStream_t s = slot.s();
    cuda::DeviceMemoryBudget* budget = lane->budget;
    const size_t ks = SizeOf(spec.dtype), vs = spec.has_values ? SizeOf(spec.values_dtype) : 0;
    const bool perm = spec.has_values || spec.want_indices;
    VisitDType(spec.dtype, [&](auto t) {
      using T = typename decltype(t)::type;
      size_t temp_bytes = 0;
      sh.Call(kernels::Sort<T>(nullptr, temp_bytes, nullptr, nullptr, n, spec.descending, s), "sort temp size");
      cuda::DeviceBuffer d_keys(n * ks, s, budget), d_temp(temp_bytes, s, budget);
      cuda::DeviceBuffer d_perm(perm ? n * 4 : 0, s, budget), d_vin(n * vs, s, budget), d_vout(n * vs, s, budget);
      cuda::DeviceBuffer d_idx(indices_out ? n * 8 : 0, s, budget);
      sh.Call(cudaEventRecord(slot.start.get(), s), "cudaEventRecord");
      sh.Call(cudaMemcpyAsync(d_keys.get(), keys, n * ks, cudaMemcpyHostToDevice, s), "H2D sort keys");
      if (vs) sh.Call(cudaMemcpyAsync(d_vin.get(), values, n * vs, cudaMemcpyHostToDevice, s), "H2D sort values");
      sh.Call(cudaEventRecord(slot.h2d_done.get(), s), "cudaEventRecord");
      auto* p = static_cast<uint32_t*>(d_perm.get());
      sh.Call(kernels::Sort<T>(d_temp.get(), temp_bytes, static_cast<T*>(d_keys.get()), perm ? p : nullptr, n,
                               spec.descending, s),
              "sort kernel");
      if (vs) sh.Call(kernels::Gather(d_vin.get(), vs, p, d_vout.get(), n, s), "gather values");
      if (indices_out) sh.Call(kernels::WidenIndices(p, static_cast<int64_t*>(d_idx.get()), n, s), "widen indices");
      sh.Call(cudaEventRecord(slot.kernel_done.get(), s), "cudaEventRecord");
      if (keys_out) sh.Call(cudaMemcpyAsync(keys_out, d_keys.get(), n * ks, cudaMemcpyDeviceToHost, s), "D2H sort keys");
      if (values_out) sh.Call(cudaMemcpyAsync(values_out, d_vout.get(), n * vs, cudaMemcpyDeviceToHost, s), "D2H values");
      if (indices_out) sh.Call(cudaMemcpyAsync(indices_out, d_idx.get(), n * 8, cudaMemcpyDeviceToHost, s), "D2H indices");
      sh.Call(cudaEventRecord(slot.d2h_done.get(), s), "cudaEventRecord");
      sh.Call(cudaStreamSynchronize(s), "cudaStreamSynchronize");
      AddStepTimes(slot, times);
    });
    return "radix_sort";
  }
  std::unique_ptr<HistogramSession> NewHistogram(const HistogramSpec& spec) override {
    CheckHistogramSpec(spec);
    return VisitDType(spec.dtype, [&](auto t) -> std::unique_ptr<HistogramSession> {
      return std::make_unique<CudaHistogram<typename decltype(t)::type>>(sh_, spec);
    });
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

  std::shared_ptr<Shared> sh_;
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
    auto sh = std::make_shared<Shared>(device, options.streams, options.device_memory_limit);
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
