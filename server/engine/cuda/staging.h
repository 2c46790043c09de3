// The CUDA engine's staging resources: a slot (stream, pinned and device buffers, events), a
// staging pair (two slots whose copies overlap each other's kernels, plus the kernels'
// temporary storage), the pool that hands pairs to calls, and the device state every session
// shares. "Lane" means only a striped array's call (the service's lane join), never these.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "engine/cuda_resources.h"
#include "engine/engine.h"
#include "gpuscan/kernels/temp_storage.h"

namespace gpuscan::engine::cuda {


// Each chunk travels in sub-chunks of at most this many bytes through two staging slots.
// 2 MiB keeps kernels long enough to amortise their launch while a 4 MiB chunk still gets
// copy/compute overlap.
constexpr size_t kSubChunkBytes = size_t{2} << 20;
// Indices (int64) of the most elements a sub-chunk can hold (4-byte dtypes).
constexpr size_t kIndexBytes = kSubChunkBytes / 4 * sizeof(int64_t);
constexpr size_t kFlagBytes = kSubChunkBytes / 4;

inline uint64_t ElapsedUs(cudaEvent_t from, cudaEvent_t to) {
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

// Device bytes of a pair's two slots. A pair takes them from the budget in one piece before it
// allocates any: under a --device-memory-limit that fits one pair, two calls building pairs at
// once could otherwise each hold half a pair, both fail, and the second find no pair to wait for.
constexpr size_t kSlotDeviceBytes = 2 * kSubChunkBytes + kFlagBytes + kIndexBytes + sizeof(uint64_t);
constexpr size_t kPairStagingBytes = 2 * kSlotDeviceBytes;

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

// A pair: two slots (copy of one overlaps the kernel of the other) and the kernels' temporary
// storage. A session holds a pair for one Process call; pairs are reused across calls.
struct StagingPair {
  // The slots allocate uncounted: the reservation counts them.
  explicit StagingPair(cuda::DeviceMemoryBudget* b)
      : budget(b), staging(b, kPairStagingBytes), slots{Slot(nullptr), Slot(nullptr)} {}
  cuda::DeviceMemoryBudget* budget;
  BudgetReservation staging;
  Slot slots[2];
  cuda::DeviceBuffer temp;
  cudaEvent_t last_kernel = nullptr;  // the most recent kernel on this pair (kernels run in order)

  // For registered host memory (RunDirect, pipeline.h): a third stream, so that uploads, kernels
  // and downloads each have a queue of their own, and the events that pass the four device
  // buffers (each slot's d_in and d_out) from one queue to the next. Made on first use.
  struct Ring {
    static constexpr int kBuffers = 4;
    cuda::Stream download;
    cuda::Event uploaded[kBuffers], ran[kBuffers], freed[kBuffers];
    cuda::Event h2d_start, h2d_end, kernel_start, kernel_end, d2h_start, d2h_end;
  };
  std::unique_ptr<Ring> ring;

  void EnsureTemp(size_t bytes) {
    if (bytes <= temp.size()) return;
    Quiesce();
    temp = cuda::DeviceBuffer(std::max<size_t>(bytes, 1 << 20), slots[0].s(), budget);
    cuda::Check(kernels::ClearTempStorage(temp.get(), temp.size(), slots[0].s()), "ClearTempStorage");
  }
  // Waits for everything on the pair; used before reuse after an error.
  void Quiesce() {
    for (Slot& s : slots) {
      cudaStreamSynchronize(s.s());
      s.busy = false;
    }
    if (ring) cudaStreamSynchronize(ring->download.get());
    last_kernel = nullptr;
  }
};

class StagingPool {
 public:
  StagingPool(int max_pairs, cuda::DeviceMemoryBudget* budget) : max_pairs_(std::max(1, max_pairs)), budget_(budget) {}
  StagingPair* Acquire() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      if (!free_.empty()) {
        StagingPair* pair = free_.back();
        free_.pop_back();
        return pair;
      }
      if (static_cast<int>(all_.size()) < max_pairs_) {
        all_.push_back(nullptr);  // reserve the place; build outside the lock
        lock.unlock();
        std::unique_ptr<StagingPair> pair;
        try {
          pair = std::make_unique<StagingPair>(budget_);
        } catch (const Error& e) {
          lock.lock();
          all_.erase(std::find(all_.begin(), all_.end(), nullptr));
          // Out of device memory (or over --device-memory-limit) while other pairs exist or are
          // being built: run with those, waiting for one, instead of failing the call. Only a
          // call that finds no other pair at all fails; waiters wake and retry then.
          cv_.notify_all();
          if (e.code() != ErrorCode::kResourceExhausted || all_.empty()) throw;
          max_pairs_ = static_cast<int>(all_.size());
          continue;
        } catch (...) {
          lock.lock();
          all_.erase(std::find(all_.begin(), all_.end(), nullptr));
          cv_.notify_all();
          throw;
        }
        StagingPair* raw = pair.get();
        lock.lock();
        *std::find(all_.begin(), all_.end(), nullptr) = std::move(pair);
        return raw;
      }
      cv_.wait(lock);
    }
  }
  void Release(StagingPair* pair) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      free_.push_back(pair);
    }
    cv_.notify_one();
  }

 private:
  int max_pairs_;  // lowered when device memory runs out with pairs already built
  cuda::DeviceMemoryBudget* budget_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::unique_ptr<StagingPair>> all_;
  std::vector<StagingPair*> free_;
};

// State the engine and its sessions share (sessions may outlive the engine object).
struct Shared {
  int device = 0;
  cudaDeviceProp prop{};
  cuda::DeviceMemoryBudget budget;  // before pairs: they allocate from it
  StagingPool pairs;
  std::atomic<bool> healthy{true};
  std::mutex reason_mu;
  std::string reason;

  Shared(int dev, int max_pairs, size_t memory_limit)
      : device(dev), budget(memory_limit), pairs(max_pairs, &budget) {}

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

// Holds a pair for one Process call; after an error the pair is drained before reuse.
class StagingLease {
 public:
  explicit StagingLease(Shared& shared) : shared_(shared), pair_(shared.pairs.Acquire()) {}
  ~StagingLease() {
    if (std::uncaught_exceptions() > entry_exceptions_) pair_->Quiesce();
    shared_.pairs.Release(pair_);
  }
  StagingPair* operator->() const { return pair_; }
  StagingPair& operator*() const { return *pair_; }

 private:
  Shared& shared_;
  StagingPair* pair_;
  int entry_exceptions_ = std::uncaught_exceptions();
};

}  // namespace gpuscan::engine::cuda
