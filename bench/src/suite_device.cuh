// The kernel suite's device plumbing, shared by suite.cu and the families (suite_*.cu): CUDA
// errors as gpuscan errors, RAII buffers, streams and events, and the data and check kernels
// more than one family uses.
//
// Data: integers drawn from a hash of the index, also for float32/float64 (-7..7, mean 0), so
// every partial sum stays far below 2^24 up to n = 2^30 and float sums are exact in any
// association order: results can be compared exactly against CUB (a tolerance of 1e-6 relative
// is allowed for floats all the same). CUB itself is checked independently: its scan by
// out[i] == out[i-1] + in[i] on the device, its reduce against an int64 sum, its compaction's
// count against the number of set flags.
#pragma once

#include <cuda_runtime_api.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

#include "gpuscan/kernels/operators.h"
#include "gpuscan/types.h"

namespace gpuscan::bench::detail {

using types::DType;
using types::Error;
using types::ErrorCode;

inline void Check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  cudaGetLastError();  // clear a non-sticky error before throwing
  throw Error(e == cudaErrorMemoryAllocation ? ErrorCode::kResourceExhausted : ErrorCode::kInternal,
              std::string(what) + ": " + cudaGetErrorString(e));
}
#define BENCH_CHECK(expr) Check((expr), #expr)

constexpr std::size_t kAlign = 256;
inline std::size_t RoundUp(std::size_t x) { return (x + kAlign - 1) / kAlign * kAlign; }

// One cudaMalloc'd buffer.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { Release(); }
  void Release() {
    if (ptr_) cudaFree(ptr_);
    ptr_ = nullptr;
    bytes_ = 0;
  }
  // false (error cleared) when the device has not that much memory free.
  bool Allocate(std::size_t bytes) {
    Release();
    if (bytes == 0) return true;
    const cudaError_t e = cudaMalloc(&ptr_, bytes);
    if (e == cudaErrorMemoryAllocation) {
      cudaGetLastError();
      ptr_ = nullptr;
      return false;
    }
    Check(e, "cudaMalloc");
    bytes_ = bytes;
    return true;
  }
  char* get() const { return static_cast<char*>(ptr_); }
  std::size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
};

class Stream {
 public:
  Stream() { BENCH_CHECK(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking)); }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  ~Stream() { cudaStreamDestroy(s_); }
  cudaStream_t get() const { return s_; }

 private:
  cudaStream_t s_ = nullptr;
};

class Event {
 public:
  Event() { BENCH_CHECK(cudaEventCreate(&e_)); }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  ~Event() { cudaEventDestroy(e_); }
  cudaEvent_t get() const { return e_; }

 private:
  cudaEvent_t e_ = nullptr;
};

// ---- device-side data and checks ---------------------------------------------------------

constexpr int kGrid = 2048, kBlock = 256;

__device__ __forceinline__ uint64_t Hash(uint64_t i, uint64_t seed) {
  uint64_t z = (i + seed) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

template <class T>
__global__ void FillValues(T* p, uint64_t n, uint64_t seed) {
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < n; i += uint64_t(gridDim.x) * blockDim.x) {
    const uint64_t z = Hash(i, seed);
    if constexpr (std::is_floating_point_v<T>) {
      p[i] = T(int(z % 15) - 7);
    } else if constexpr (std::is_signed_v<T>) {
      p[i] = T(int(z % 1000) - 500);
    } else {
      p[i] = T(z % 1000);
    }
  }
}

// Half the flags set (suite.cu).
__global__ void FillFlags(uint8_t* p, uint64_t n, uint64_t seed);

template <class T>
__device__ __forceinline__ bool Same(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    const double d = double(a) - double(b), tol = 1e-6 * fabs(double(b));
    return d <= tol && d >= -tol;  // false for NaN
  } else {
    return a == b;
  }
}

template <class T>
__global__ void CountDifferent(const T* a, const T* b, uint64_t n, unsigned long long* bad) {
  unsigned long long mine = 0;
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < n; i += uint64_t(gridDim.x) * blockDim.x) {
    if (!Same(a[i], b[i])) ++mine;
  }
  if (mine) atomicAdd(bad, mine);
}

// Sum of integer-valued elements in wrapping 64-bit arithmetic (exact for our data).
template <class T>
__global__ void SumAsInt64(const T* in, uint64_t n, unsigned long long* acc) {
  unsigned long long mine = 0;
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < n; i += uint64_t(gridDim.x) * blockDim.x) {
    mine += static_cast<unsigned long long>(static_cast<long long>(in[i]));
  }
  atomicAdd(acc, mine);
}

inline void CheckLaunch() { BENCH_CHECK(cudaGetLastError()); }

// The one place a DType becomes a template argument.
template <class F>
auto VisitDType(DType t, F&& f) {
  switch (t) {
    case DType::kInt32: return f(int32_t{});
    case DType::kInt64: return f(int64_t{});
    case DType::kUInt32: return f(uint32_t{});
    case DType::kUInt64: return f(uint64_t{});
    case DType::kFloat32: return f(float{});
    case DType::kFloat64: return f(double{});
  }
  throw Error(ErrorCode::kInvalidArgument, "unknown dtype");
}

template <class T>
bool SameHost(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    return std::fabs(double(a) - double(b)) <= 1e-6 * std::fabs(double(b));
  } else {
    return a == b;
  }
}

struct Times {
  double median_us = 0, min_us = 0, max_us = 0;
};

// Scalars on the device: [0] mismatch count, [1] int64 sum / flag count, [2] kept count,
// [4..5] a reduce's output, [6..7] the reference reduce's output.
constexpr std::size_t kScalarBytes = 256;

}  // namespace gpuscan::bench::detail
