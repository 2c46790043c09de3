// Helpers for the kernel tests: a skip when there is no GPU, RAII device buffers that start
// poisoned (0xFF bytes), and the (dtype, operator) lists the tests sweep.
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "reference.h"
#include "gpuscan/kernels/operators.h"

namespace gpuscan::gputest {

#define CUDA_OK(expr)                                                                    \
  do {                                                                                   \
    const cudaError_t e_ = (expr);                                                       \
    ASSERT_EQ(e_, cudaSuccess) << #expr << ": " << cudaGetErrorString(e_);               \
  } while (0)

// Every test skips, saying why, when no CUDA device is present (CI has none).
class GpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    int count = 0;
    const cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0) {
      (void)cudaGetLastError();
      have_device_ = false;
      GTEST_SKIP() << "no CUDA device (cudaGetDeviceCount: " << cudaGetErrorString(e)
                   << ", count " << count << ")";
    }
  }
  void TearDown() override {
    if (!have_device_) return;
    // A kernel fault is sticky: report it at the test that caused it.
    const cudaError_t e = cudaDeviceSynchronize();
    EXPECT_EQ(e, cudaSuccess) << cudaGetErrorString(e);
  }

 private:
  bool have_device_ = true;
};

// Device buffer of n elements plus `guard` extra ones, all poisoned with 0xFF bytes.
template <class T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(std::size_t n = 0, std::size_t guard = 16) : n_(n), total_(n + guard) {
    if (cudaMalloc(reinterpret_cast<void**>(&p_), total_ * sizeof(T) + 1) != cudaSuccess) p_ = nullptr;
    Poison();
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { cudaFree(p_); }

  T* get() const { return p_; }
  std::size_t size() const { return n_; }
  bool ok() const { return p_ != nullptr; }
  void Poison() {
    if (p_ != nullptr) cudaMemset(p_, 0xFF, total_ * sizeof(T));
  }
  void Upload(const std::vector<T>& v, std::size_t offset = 0) {
    if (!v.empty()) cudaMemcpy(p_ + offset, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice);
  }
  std::vector<T> Download(std::size_t count, std::size_t offset = 0) const {
    std::vector<T> v(count);
    if (count > 0) cudaMemcpy(v.data(), p_ + offset, count * sizeof(T), cudaMemcpyDeviceToHost);
    return v;
  }
  T DownloadOne(std::size_t offset = 0) const {
    T v{};
    cudaMemcpy(&v, p_ + offset, sizeof(T), cudaMemcpyDeviceToHost);
    return v;
  }
  // Whether the guard elements after n are still poison.
  bool GuardIntact() const {
    unsigned char g[256];
    const std::size_t bytes = std::min(sizeof(g), (total_ - n_) * sizeof(T));
    if (bytes == 0) return true;
    cudaMemcpy(g, p_ + n_, bytes, cudaMemcpyDeviceToHost);
    for (std::size_t i = 0; i < bytes; ++i) {
      if (g[i] != 0xFF) return false;
    }
    return true;
  }

 private:
  T* p_ = nullptr;
  std::size_t n_, total_;
};

// Temp storage that is allocated and cleared once, and grows (cleared again) on demand.
class TempBuffer {
 public:
  ~TempBuffer() { cudaFree(p_); }
  void* Reserve(std::size_t bytes) {
    if (bytes > bytes_) {
      cudaFree(p_);
      p_ = nullptr;
      if (cudaMalloc(&p_, bytes) != cudaSuccess) return nullptr;
      cudaMemset(p_, 0, bytes);
      bytes_ = bytes;
    }
    return p_;
  }
  std::size_t bytes() const { return bytes_; }

 private:
  void* p_ = nullptr;
  std::size_t bytes_ = 0;
};

template <class T>
const char* DtypeName() {
  if constexpr (std::is_same_v<T, int32_t>) return "int32";
  if constexpr (std::is_same_v<T, int64_t>) return "int64";
  if constexpr (std::is_same_v<T, uint32_t>) return "uint32";
  if constexpr (std::is_same_v<T, uint64_t>) return "uint64";
  if constexpr (std::is_same_v<T, float>) return "float";
  if constexpr (std::is_same_v<T, double>) return "double";
  return "?";
}

// Calls f(Op{}) for every operator T has.
template <class T, class F>
void ForEachOp(F&& f) {
  f(ops::Sum<T>{});
  f(ops::Product<T>{});
  f(ops::Min<T>{});
  f(ops::Max<T>{});
  if constexpr (std::is_integral_v<T>) {
    f(ops::BitAnd<T>{});
    f(ops::BitOr<T>{});
    f(ops::BitXor<T>{});
  }
}

// Calls f(T{}) for each of the six element types.
template <class F>
void ForEachDtype(F&& f) {
  f(int32_t{});
  f(int64_t{});
  f(uint32_t{});
  f(uint64_t{});
  f(float{});
  f(double{});
}

}  // namespace gpuscan::gputest
