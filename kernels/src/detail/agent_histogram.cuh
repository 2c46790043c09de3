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
// The trusted float guess (FloatGuess) counts an element in ~21 instructions where the edge
// search took ~41 (ncu), so its kernel waits on memory, not on issue: fewer, longer blocks (one
// per 64 Ki elements, 1024 to 4096) with four 16-byte loads a thread in flight and the next four
// issued before these are counted (H100, 2^28: 408 -> 366 us; bench/NOTES.md).
constexpr uint64_t kTrustedElemsPerBlock = 65536;
constexpr unsigned kTrustedMaxBlocks = 4096;
constexpr int kTrustedUnroll = 4;

// A float32 array compares in float when every edge is a float32 value (the even edges of a
// float32 array are): the same slots as in double (see hist::SlotOf), at float speed.
template <class T>
constexpr bool kFloatEdges = std::is_same_v<T, float>;

// The even bins' guess for float elements against float edges, trusted where SlotOf trusts it,
// with SlotOf's range, NaN and margin tests as compares and no branch: an element below the
// range guesses g <= 0, one above it lands within the margin of the last edge, a NaN fails
// every compare. ok false: SlotOf decides. first, last: the range's edges.
struct FloatGuess {
  float lo, scale, margin, upper;
  uint32_t bins;
  __device__ __forceinline__ uint32_t Slot(float v, float first, float last, bool& ok) const {
    const float g = (v - lo) * scale;
    const uint32_t i = __float2uint_rz(g);
    const float f = g - static_cast<float>(i);
    ok = v >= first && v <= last && f > margin && f < upper && i < bins;
    return i;
  }
};

// The slots of one 16-byte vector's elements. kTrust (float elements, float edges, even bins
// with a margin): the guesses first, and one branch for the whole vector to SlotOf when any
// guess is not trusted (ncu, H100, 2^28: the per-element branches, convergence barriers and a
// double-to-float conversion of the margin made the kernel issue-bound at ~41 instructions
// an element).
template <class T, class E, bool kTrust>
struct Slotter {
  const hist::Bins& b;
  const E* e;
  E first, last;  // held in registers: the compiler would reload them after every shared atomic
  FloatGuess q;
  static constexpr int kPer = int(sizeof(uint4) / sizeof(T));

  __device__ __forceinline__ uint32_t operator()(T x) const { return hist::SlotOf(x, b, e, first, last); }

  __device__ __forceinline__ void Vector(const T (&v)[kPer], uint32_t (&slot)[kPer]) const {
    if constexpr (kTrust) {
      bool all = true;
#pragma unroll
      for (int k = 0; k < kPer; ++k) {
        bool ok;
        slot[k] = q.Slot(v[k], first, last, ok);
        all = all && ok;
      }
      if (all) return;
    }
#pragma unroll
    for (int k = 0; k < kPer; ++k) slot[k] = (*this)(v[k]);
  }
};

template <class T, class Slot, class Count>
__device__ __forceinline__ void CountVector(const uint4& raw, const Slot& slot, Count count) {
  T v[Slot::kPer];
  memcpy(v, &raw, sizeof(raw));
  uint32_t s[Slot::kPer];
  slot.Vector(v, s);
#pragma unroll
  for (int k = 0; k < Slot::kPer; ++k) count(s[k]);
}

// 16-byte loads over the aligned body, kUnroll of them in flight per thread (kPrefetch: the next
// kUnroll are issued before the current ones are counted), then the tail one by one.
template <int kUnroll, bool kPrefetch, class T, class Slot, class Count>
__device__ __forceinline__ void CountAll(const T* __restrict__ in, uint64_t n, const Slot& slot, Count count) {
  constexpr uint64_t kPerVector = sizeof(uint4) / sizeof(T);
  const uint64_t stride = static_cast<uint64_t>(gridDim.x) * blockDim.x;
  const uint64_t first = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const uint64_t vectors = reinterpret_cast<uintptr_t>(in) % sizeof(uint4) == 0 ? n / kPerVector : 0;
  const uint4* __restrict__ vin = reinterpret_cast<const uint4*>(in);
  const uint64_t step = kUnroll * stride;
  uint64_t v = first;
  auto whole = [&](uint64_t at) { return at + (kUnroll - 1) * stride < vectors; };
  if constexpr (kPrefetch) {
    if (whole(v)) {
      uint4 a[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) a[u] = vin[v + u * stride];
      for (;;) {
        const bool more = whole(v + step);
        uint4 b[kUnroll];
        if (more) {
#pragma unroll
          for (int u = 0; u < kUnroll; ++u) b[u] = vin[v + step + u * stride];
        }
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) CountVector<T>(a[u], slot, count);
        v += step;
        if (!more) break;
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) a[u] = b[u];
      }
    }
  } else {
    for (; whole(v); v += step) {
      uint4 a[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) a[u] = vin[v + u * stride];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) CountVector<T>(a[u], slot, count);
    }
  }
  for (; v < vectors; v += stride) CountVector<T>(vin[v], slot, count);
  for (uint64_t i = vectors * kPerVector + first; i < n; i += stride) count(slot(in[i]));
}

template <class T, class E, bool kTrust, int kUnroll = 2, bool kPrefetch = false>
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
  FloatGuess q{};
  if constexpr (kTrust) {
    const float margin = static_cast<float>(b.margin_f);
    q = {static_cast<float>(b.lo), static_cast<float>(b.scale), margin, 1.0f - margin, b.bins};
  }
  const Slotter<T, E, kTrust> slot{b, edges, edges[0], edges[b.bins], q};
  CountAll<kUnroll, kPrefetch, T>(in, n, slot, [&](uint32_t s) { atomicAdd(&local[s], 1u); });
  __syncthreads();
  for (uint32_t i = threadIdx.x; i < slots; i += blockDim.x) {
    if (local[i]) atomicAdd(&counts[i], static_cast<unsigned long long>(local[i]));
  }
}

template <class T>
__global__ void __launch_bounds__(kThreads) GlobalKernel(const T* __restrict__ in, uint64_t n, hist::Bins b,
                                                         unsigned long long* counts) {
  const Slotter<T, double, false> slot{b, b.edges, b.edges[0], b.edges[b.bins], {}};
  CountAll<2, false, T>(in, n, slot, [&](uint32_t s) { atomicAdd(&counts[s], 1ull); });
}

template <class T>
cudaError_t Launch(const T* d_in, uint64_t n, const hist::Bins& bins, unsigned long long* d_counts,
                   cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  // About one block per `per_block` elements, at least a wave and at most `most` (short arrays:
  // one per kThreads * kItemsPerThread).
  auto grid = [n](uint64_t per_block, unsigned most) {
    const uint64_t cap = std::min<uint64_t>(std::max<uint64_t>(n / per_block, kWaveBlocks), most);
    return static_cast<unsigned>(std::min(DivUp(n, uint64_t{kThreads} * kItemsPerThread), cap));
  };
  const unsigned blocks = grid(kElemsPerBlock, kMaxBlocks);
  if (bins.bins <= kSharedMaxBins) {
    if (kFloatEdges<T> && bins.float_edges) {
      const size_t smem = (bins.bins + 1) * sizeof(float) + (bins.bins + hist::kExtraSlots) * sizeof(unsigned);
      bool trusted = false;
      if constexpr (kFloatEdges<T>) {  // the guess is in float: float elements only
        if (bins.even && bins.margin_f >= 0) {
          SharedKernel<T, float, true, kTrustedUnroll, true>
              <<<grid(kTrustedElemsPerBlock, kTrustedMaxBlocks), kThreads, smem, stream>>>(d_in, n, bins, d_counts);
          trusted = true;
        }
      }
      if (!trusted) SharedKernel<T, float, false><<<blocks, kThreads, smem, stream>>>(d_in, n, bins, d_counts);
    } else {
      const size_t smem = (bins.bins + 1) * sizeof(double) + (bins.bins + hist::kExtraSlots) * sizeof(unsigned);
      SharedKernel<T, double, false><<<blocks, kThreads, smem, stream>>>(d_in, n, bins, d_counts);
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
