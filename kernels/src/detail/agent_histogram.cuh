// The histogram kernel: per-block counters in shared memory (bins up to kSharedMaxBins, edges
// copied beside them), flushed once per block into the uint64 counters; more bins count straight
// into global memory. The bin of each element is hist::SlotOf, the CPU engine's own function.
#pragma once

#include <algorithm>

#include "detail/common.cuh"
#include "gpuscan/kernels/histogram.h"

namespace gpuscan::kernels::detail::histogram {

constexpr int kThreads = 256;
constexpr uint32_t kSharedMaxBins = 2048;  // edges + counters: 2049 * 8 + 2051 * 4 bytes = 24 KiB
constexpr unsigned kMaxBlocks = 2048;       // grid-stride beyond: counters flush once per block
constexpr int kItemsPerThread = 8;          // per block launch unit, to size the grid

template <class T, class Count>
__device__ __forceinline__ void CountAll(const T* __restrict__ in, uint64_t n, const hist::Bins& b, Count count) {
  const uint64_t stride = static_cast<uint64_t>(gridDim.x) * blockDim.x;
  uint64_t i = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  // Four loads in flight before their counts: the bin search waits on nothing else.
  for (; i + 3 * stride < n; i += 4 * stride) {
    const T v0 = in[i], v1 = in[i + stride], v2 = in[i + 2 * stride], v3 = in[i + 3 * stride];
    count(hist::SlotOf(v0, b));
    count(hist::SlotOf(v1, b));
    count(hist::SlotOf(v2, b));
    count(hist::SlotOf(v3, b));
  }
  for (; i < n; i += stride) count(hist::SlotOf(in[i], b));
}

template <class T>
__global__ void __launch_bounds__(kThreads) SharedKernel(const T* __restrict__ in, uint64_t n, hist::Bins b,
                                                         unsigned long long* counts) {
  extern __shared__ double edges[];  // bins + 1 edges, then bins + kExtraSlots counters
  const uint32_t slots = b.bins + hist::kExtraSlots;
  unsigned* local = reinterpret_cast<unsigned*>(edges + b.bins + 1);
  for (uint32_t i = threadIdx.x; i <= b.bins; i += blockDim.x) edges[i] = b.edges[i];
  for (uint32_t i = threadIdx.x; i < slots; i += blockDim.x) local[i] = 0;
  __syncthreads();
  hist::Bins sb = b;
  sb.edges = edges;
  // A block counts at most n / gridDim.x elements of one launch: the engine's launches are a few
  // MiB, far below 2^32 per counter.
  CountAll(in, n, sb, [&](uint32_t s) { atomicAdd(&local[s], 1u); });
  __syncthreads();
  for (uint32_t i = threadIdx.x; i < slots; i += blockDim.x) {
    if (local[i]) atomicAdd(&counts[i], static_cast<unsigned long long>(local[i]));
  }
}

template <class T>
__global__ void __launch_bounds__(kThreads) GlobalKernel(const T* __restrict__ in, uint64_t n, hist::Bins b,
                                                         unsigned long long* counts) {
  CountAll(in, n, b, [&](uint32_t s) { atomicAdd(&counts[s], 1ull); });
}

template <class T>
cudaError_t Launch(const T* d_in, uint64_t n, const hist::Bins& bins, unsigned long long* d_counts,
                   cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  const unsigned blocks =
      static_cast<unsigned>(std::min<uint64_t>(DivUp(n, uint64_t{kThreads} * kItemsPerThread), kMaxBlocks));
  if (bins.bins <= kSharedMaxBins) {
    const size_t smem = (bins.bins + 1) * sizeof(double) + (bins.bins + hist::kExtraSlots) * sizeof(unsigned);
    SharedKernel<T><<<blocks, kThreads, smem, stream>>>(d_in, n, bins, d_counts);
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
