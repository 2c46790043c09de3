// kernels::Sort: code the keys (sort_keys.h), CUB's radix sort of the codes (with the
// permutation as values when asked), decode. Heavy to compile: included by sort_*.cu only.
#pragma once

#include <cub/device/device_radix_sort.cuh>

#include <algorithm>
#include <type_traits>

#include "common.cuh"
#include "gpuscan/kernels/sort.h"
#include "gpuscan/kernels/sort_keys.h"

namespace gpuscan::kernels {
namespace detail::sorting {

constexpr int kBlock = 256;
inline unsigned Blocks(uint64_t n) {
  return static_cast<unsigned>(std::min<uint64_t>((n + kBlock - 1) / kBlock, 65535u * 8u));
}

template <class T>
__global__ void EncodeKernel(const T* in, sortkey::Code<T>* out, uint32_t* perm, uint64_t n, bool descending) {
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < n; i += uint64_t(gridDim.x) * blockDim.x) {
    out[i] = sortkey::Encode(in[i], descending);
    if (perm) perm[i] = static_cast<uint32_t>(i);
  }
}

template <class I>  // a template, so that every .cu including this may instantiate it
__global__ void IotaKernel(I* perm, uint64_t n) {
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < n; i += uint64_t(gridDim.x) * blockDim.x) {
    perm[i] = static_cast<I>(i);
  }
}

template <class T>
__global__ void DecodeKernel(const sortkey::Code<T>* in, T* out, uint64_t n, bool descending) {
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < n; i += uint64_t(gridDim.x) * blockDim.x) {
    out[i] = sortkey::Decode<T>(in[i], descending);
  }
}

inline std::size_t Round256(std::size_t b) { return (b + 255) & ~std::size_t{255}; }

}  // namespace detail::sorting

// Temp: two code buffers, two permutation buffers (when asked), then CUB's own.
template <class T>
cudaError_t Sort(void* d_temp, std::size_t& temp_bytes, T* d_keys, uint32_t* d_perm, uint64_t n, bool descending,
                 cudaStream_t stream) {
  using namespace detail::sorting;
  using U = sortkey::Code<T>;
  if (n > 0x7fffffffull) return cudaErrorInvalidValue;
  const int items = static_cast<int>(std::max<uint64_t>(n, 1));
  const std::size_t codes = Round256(items * sizeof(U)), perms = d_perm || !d_temp ? Round256(items * 4ull) : 0;
  cub::DoubleBuffer<U> k(nullptr, nullptr);
  cub::DoubleBuffer<uint32_t> p(nullptr, nullptr);
  const bool with_perm = d_perm != nullptr;
  if (d_temp == nullptr) {
    // Sized for the permutation too: one size serves both kinds of call.
    std::size_t a = 0, b = 0;
    GPUSCAN_TRY(cub::DeviceRadixSort::SortKeys(nullptr, a, k, items, 0, int(8 * sizeof(U)), stream));
    GPUSCAN_TRY(cub::DeviceRadixSort::SortPairs(nullptr, b, k, p, items, 0, int(8 * sizeof(U)), stream));
    temp_bytes = 2 * codes + 2 * Round256(items * 4ull) + std::max(a, b);
    return cudaSuccess;
  }
  if (n == 0) return cudaSuccess;
  if (d_keys == nullptr) return cudaErrorInvalidValue;
  char* base = static_cast<char*>(d_temp);
  k = cub::DoubleBuffer<U>(reinterpret_cast<U*>(base), reinterpret_cast<U*>(base + codes));
  char* rest = base + 2 * codes;
  if (with_perm) {
    p = cub::DoubleBuffer<uint32_t>(reinterpret_cast<uint32_t*>(rest), reinterpret_cast<uint32_t*>(rest + perms));
    rest += 2 * perms;
  }
  const std::size_t used = static_cast<std::size_t>(rest - base);
  if (used > temp_bytes) return cudaErrorInvalidValue;
  std::size_t cub_room = temp_bytes - used;
  // Unsigned keys ascending are their own codes: sorted where they are, no coding passes.
  const bool in_place = std::is_unsigned_v<T> && !descending;
  if (in_place) {
    k = cub::DoubleBuffer<U>(reinterpret_cast<U*>(d_keys), k.Alternate());
    if (with_perm) {
      IotaKernel<uint32_t><<<Blocks(n), kBlock, 0, stream>>>(p.Current(), n);
      GPUSCAN_CHECK_LAUNCH();
    }
  } else {
    EncodeKernel<T><<<Blocks(n), kBlock, 0, stream>>>(d_keys, k.Current(), with_perm ? p.Current() : nullptr, n,
                                                       descending);
    GPUSCAN_CHECK_LAUNCH();
  }
  if (with_perm) {
    GPUSCAN_TRY(cub::DeviceRadixSort::SortPairs(rest, cub_room, k, p, int(n), 0, int(8 * sizeof(U)), stream));
  } else {
    GPUSCAN_TRY(cub::DeviceRadixSort::SortKeys(rest, cub_room, k, int(n), 0, int(8 * sizeof(U)), stream));
  }
  if (!in_place) {
    DecodeKernel<T><<<Blocks(n), kBlock, 0, stream>>>(k.Current(), d_keys, n, descending);
    GPUSCAN_CHECK_LAUNCH();
  } else if (k.Current() != reinterpret_cast<U*>(d_keys)) {
    GPUSCAN_TRY(cudaMemcpyAsync(d_keys, k.Current(), n * sizeof(U), cudaMemcpyDeviceToDevice, stream));
  }
  if (with_perm) {
    GPUSCAN_TRY(cudaMemcpyAsync(d_perm, p.Current(), n * 4, cudaMemcpyDeviceToDevice, stream));
  }
  return cudaSuccess;
}

template <class U>
cudaError_t SortKeysCub(void* d_temp, std::size_t& temp_bytes, U* d_keys, U* d_alt, uint64_t n, cudaStream_t stream) {
  if (n > 0x7fffffffull) return cudaErrorInvalidValue;
  cub::DoubleBuffer<U> k(d_keys, d_alt);
  GPUSCAN_TRY(cub::DeviceRadixSort::SortKeys(d_temp, temp_bytes, k, int(std::max<uint64_t>(n, 1)), 0,
                                             int(8 * sizeof(U)), stream));
  if (d_temp != nullptr && k.Current() != d_keys) {
    return cudaMemcpyAsync(d_keys, k.Current(), n * sizeof(U), cudaMemcpyDeviceToDevice, stream);
  }
  return cudaSuccess;
}

}  // namespace gpuscan::kernels

#define GPUSCAN_INSTANTIATE_SORT(T)                                                                   \
  template cudaError_t gpuscan::kernels::Sort<T>(void*, std::size_t&, T*, uint32_t*, uint64_t, bool, cudaStream_t);
