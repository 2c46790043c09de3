// The histogram kernel: per-block counters in shared memory (bins up to kSharedMaxBins, edges
// copied beside them), flushed once per block into the uint64 counters; more bins count straight
// into global memory. The bin of each element is hist::SlotOf, the CPU engine's own function.
#pragma once

#include <algorithm>
#include <type_traits>

#include "detail/common.cuh"
#include "gpuscan/kernels/histogram.h"

namespace gpuscan::kernels::detail::histogram {

constexpr int kThreads = 256;
constexpr uint32_t kSharedMaxBins = 2048;  // edges + counters: 2049 * 8 + 2051 * 4 bytes = 24 KiB
// Blocks: one per kThreads * kItemsPerThread elements for short arrays; for long ones about one
// per kElemsPerBlock elements, but at least a wave (kWaveBlocks: 132 SMs x 8 blocks on the H100)
// and at most kMaxBlocks. Each block ends with a global atomic per slot, which contend: H100,
// 256 bins, the best fixed grid was 1056 blocks at 2^22-2^24, 4096 at 2^26, 16384 at 2^28
// (bench/NOTES.md).
constexpr uint64_t kElemsPerBlock = 16384;
constexpr unsigned kWaveBlocks = 1024;
constexpr unsigned kMaxBlocks = 16384;
constexpr int kItemsPerThread = 8;          // per block launch unit, to size the grid

// A float32 array compares in float when every edge is a float32 value (the even edges of a
// float32 array are): the same slots as in double (see hist::SlotOf), at float speed.
template <class T>
constexpr bool kFloatEdges = std::is_same_v<T, float>;

template <class T, class E, class Count>
__device__ __forceinline__ void CountVector(const uint4& raw, const hist::Bins& b, const E* e, E first, E last,
                                            Count count) {
  T v[sizeof(uint4) / sizeof(T)];
  memcpy(v, &raw, sizeof(raw));
#pragma unroll
  for (int k = 0; k < int(sizeof(uint4) / sizeof(T)); ++k) count(hist::SlotOf(v[k], b, e, first, last));
}

// 16-byte loads (two in flight per thread) over the aligned body, then the tail one by one.
template <class T, class E, class Count>
__device__ __forceinline__ void CountAll(const T* __restrict__ in, uint64_t n, const hist::Bins& b, const E* e,
                                         Count count) {
  constexpr uint64_t kPerVector = sizeof(uint4) / sizeof(T);
  const uint64_t stride = static_cast<uint64_t>(gridDim.x) * blockDim.x;
  const uint64_t first = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const uint64_t vectors = reinterpret_cast<uintptr_t>(in) % sizeof(uint4) == 0 ? n / kPerVector : 0;
  const uint4* __restrict__ vin = reinterpret_cast<const uint4*>(in);
  const E lo = e[0], hi = e[b.bins];  // once: the compiler would reload them after every shared atomic
  uint64_t v = first;
  for (; v + stride < vectors; v += 2 * stride) {
    const uint4 a = vin[v], c = vin[v + stride];
    CountVector<T>(a, b, e, lo, hi, count);
    CountVector<T>(c, b, e, lo, hi, count);
  }
  if (v < vectors) CountVector<T>(vin[v], b, e, lo, hi, count);
  for (uint64_t i = vectors * kPerVector + first; i < n; i += stride) count(hist::SlotOf(in[i], b, e, lo, hi));
}

template <class T, class E>
__global__ void __launch_bounds__(kThreads) SharedKernel(const T* __restrict__ in, uint64_t n, hist::Bins b,
                                                         unsigned long long* counts) {
  extern __shared__ double smem[];  // bins + 1 edges (as E), then bins + kExtraSlots counters
  E* edges = reinterpret_cast<E*>(smem);
  const uint32_t slots = b.bins + hist::kExtraSlots;
  unsigned* local = reinterpret_cast<unsigned*>(edges + b.bins + 1);
  for (uint32_t i = threadIdx.x; i <= b.bins; i += blockDim.x) edges[i] = static_cast<E>(b.edges[i]);
  for (uint32_t i = threadIdx.x; i < slots; i += blockDim.x) local[i] = 0;
  __syncthreads();
  // A block counts at most n / gridDim.x elements of one launch: the engine's launches are a few
  // MiB, far below 2^32 per counter.
  CountAll<T>(in, n, b, edges, [&](uint32_t s) { atomicAdd(&local[s], 1u); });
  __syncthreads();
  for (uint32_t i = threadIdx.x; i < slots; i += blockDim.x) {
    if (local[i]) atomicAdd(&counts[i], static_cast<unsigned long long>(local[i]));
  }
}

template <class T>
__global__ void __launch_bounds__(kThreads) GlobalKernel(const T* __restrict__ in, uint64_t n, hist::Bins b,
                                                         unsigned long long* counts) {
  CountAll<T>(in, n, b, b.edges, [&](uint32_t s) { atomicAdd(&counts[s], 1ull); });
}

template <class T>
cudaError_t Launch(const T* d_in, uint64_t n, const hist::Bins& bins, unsigned long long* d_counts,
                   cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  const uint64_t cap = std::min<uint64_t>(std::max<uint64_t>(n / kElemsPerBlock, kWaveBlocks), kMaxBlocks);
  const unsigned blocks = static_cast<unsigned>(std::min(DivUp(n, uint64_t{kThreads} * kItemsPerThread), cap));
  if (bins.bins <= kSharedMaxBins) {
    if (kFloatEdges<T> && bins.float_edges) {
      const size_t smem = (bins.bins + 1) * sizeof(float) + (bins.bins + hist::kExtraSlots) * sizeof(unsigned);
      SharedKernel<T, float><<<blocks, kThreads, smem, stream>>>(d_in, n, bins, d_counts);
    } else {
      const size_t smem = (bins.bins + 1) * sizeof(double) + (bins.bins + hist::kExtraSlots) * sizeof(unsigned);
      SharedKernel<T, double><<<blocks, kThreads, smem, stream>>>(d_in, n, bins, d_counts);
    }
  } else {
    GlobalKernel<T><<<blocks, kThreads, 0, stream>>>(d_in, n, bins, d_counts);
  }
  GPUSCAN_CHECK_LAUNCH();
  return cudaSuccess;
}

}  // namespace gpuscan::kernels::detail::histogram

template <class T>
cudaError_t gpuscan::kernels::Histogram(const T* d_in, uint64_t n, const hist::Bins& bins,
                                        unsigned long long* d_counts, cudaStream_t stream) {
  return detail::histogram::Launch(d_in, n, bins, d_counts, stream);
}

#define GPUSCAN_INSTANTIATE_HISTOGRAM(T)                                                              \
  template cudaError_t gpuscan::kernels::Histogram<T>(const T*, uint64_t, const gpuscan::hist::Bins&, \
                                                      unsigned long long*, cudaStream_t);
