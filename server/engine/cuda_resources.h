// RAII owners for the CUDA resources the CUDA engine holds (RMM-style): streams, events,
// stream-ordered device allocations and pinned host buffers. Destructors never throw; every
// other call is checked and failures become engine::Error (see CudaCheck).
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <cstddef>
#include <string>
#include <utility>

#include "engine/types.h"

namespace gpuscan::engine::cuda {

// Throws engine::Error for a failed CUDA call: out of memory → kResourceExhausted (the error is
// cleared, the device stays usable); anything else → kInternal. The engine decides separately
// whether the device is still healthy (see CudaEngine).
void Check(cudaError_t error, const char* what);

class Stream {
 public:
  Stream() { Check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate"); }
  ~Stream() {
    if (stream_) cudaStreamDestroy(stream_);
  }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  cudaStream_t get() const { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
};

class Event {
 public:
  Event() { Check(cudaEventCreate(&event_), "cudaEventCreate"); }
  ~Event() {
    if (event_) cudaEventDestroy(event_);
  }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  cudaEvent_t get() const { return event_; }

 private:
  cudaEvent_t event_ = nullptr;
};

// The engine's cap on device memory (--device-memory-limit): every DeviceBuffer takes its
// bytes here before allocating and gives them back when freed. limit 0 = no cap.
class DeviceMemoryBudget {
 public:
  explicit DeviceMemoryBudget(std::size_t limit) : limit_(limit) {}
  // Throws Error(kResourceExhausted) naming the flag when `bytes` more would pass the limit.
  void Take(std::size_t bytes) {
    std::size_t used = used_.load();
    do {
      if (limit_ && used + bytes > limit_) {
        throw Error(ErrorCode::kResourceExhausted,
                    "device memory limit reached: " + std::to_string(bytes) + " more bytes asked with " +
                        std::to_string(used) + " in use (--device-memory-limit=" + std::to_string(limit_) + ")");
      }
    } while (!used_.compare_exchange_weak(used, used + bytes));
  }
  void Give(std::size_t bytes) { used_ -= bytes; }
  std::size_t used() const { return used_.load(); }
  std::size_t limit() const { return limit_; }

 private:
  const std::size_t limit_;
  std::atomic<std::size_t> used_{0};
};

// Device memory from the device's stream-ordered pool (cudaMallocAsync), counted against
// `budget` when one is given.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(std::size_t bytes, cudaStream_t stream, DeviceMemoryBudget* budget = nullptr)
      : bytes_(bytes), stream_(stream) {
    if (!bytes) return;
    if (budget) budget->Take(bytes);
    try {
      Check(cudaMallocAsync(&ptr_, bytes, stream), "cudaMallocAsync");
    } catch (...) {
      if (budget) budget->Give(bytes);
      throw;
    }
    budget_ = budget;
  }
  ~DeviceBuffer() { Reset(); }
  DeviceBuffer(DeviceBuffer&& o) noexcept { *this = std::move(o); }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      Reset();
      std::swap(ptr_, o.ptr_);
      std::swap(bytes_, o.bytes_);
      std::swap(stream_, o.stream_);
      std::swap(budget_, o.budget_);
    }
    return *this;
  }
  void* get() const { return ptr_; }
  std::size_t size() const { return bytes_; }

 private:
  void Reset() {
    if (ptr_) {
      cudaFreeAsync(ptr_, stream_);
      if (budget_) budget_->Give(bytes_);
    }
    ptr_ = nullptr;
    bytes_ = 0;
    budget_ = nullptr;
  }
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
  cudaStream_t stream_ = nullptr;
  DeviceMemoryBudget* budget_ = nullptr;
};

// Page-locked host memory: the staging area async copies need to overlap with kernels.
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  explicit PinnedBuffer(std::size_t bytes) : bytes_(bytes) {
    if (bytes) Check(cudaMallocHost(&ptr_, bytes), "cudaMallocHost");
  }
  ~PinnedBuffer() {
    if (ptr_) cudaFreeHost(ptr_);
  }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  void* get() const { return ptr_; }
  std::size_t size() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
};

}  // namespace gpuscan::engine::cuda
