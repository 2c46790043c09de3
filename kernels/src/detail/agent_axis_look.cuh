// The axis scan's look-back walk (scan_axis_impl.cuh, kLook): LookKernel, for ScanColumns of
// exact operators with few columns. Polls are bounded (~2^23 tries): a flag that never comes
// ends in a message and a trap instead of a hung stream.
#pragma once

#include <cuda_runtime.h>

#include <cstdio>

#include <cstdint>

#include "gpuscan/kernels/operators.h"
#include "tile_state.cuh"

namespace gpuscan::kernels::axis_detail {

// ---- The look-back walk (ScanColumns of exact operators with few columns) ----------------------
// A tile is one band of G x R rows by `cw` columns (cw a power of two, 32..256; G = 256 / cw), a
// thread a column and R rows of it, held in registers. Tiles come by ticket in band-major order.
// Per tile: one status word (flags[ctile][band]: 0 none, 1 aggregate, 2 inclusive) and, per
// column, its aggregate agg[band][col] and inclusive value inc[band][col], written before the
// flag (block barrier, then one thread's gpu-scope fence and flag store) and read after it.
enum : unsigned { kNone = 0, kAggregate = 1, kInclusive = 2 };
constexpr int kLookThreads = 256;

__device__ __forceinline__ unsigned LoadAcquire(const unsigned* p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void StoreRelaxed(unsigned* p, unsigned v) {
  asm volatile("st.relaxed.gpu.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
// A published value (another block's, after the flag was acquired): from L2, never a stale L1.
template <class T>
__device__ __forceinline__ T LoadValue(const T* p) {
  if constexpr (sizeof(T) == 4) {
    unsigned v;
    asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return detail::FromBits<T>(v);
  } else {
    unsigned long long v;
    asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return detail::FromBits<T>(v);
  }
}

constexpr uint32_t kMaxSpins = 1u << 23;
static __device__ __noinline__ void GiveUp(uint64_t band, uint64_t ctile, uint64_t waiting_for) {
  printf("gpuscan scan_axis: band %llu column tile %llu (block %u): the flag of band %llu never came\n",
         static_cast<unsigned long long>(band), static_cast<unsigned long long>(ctile), blockIdx.x,
         static_cast<unsigned long long>(waiting_for));
  __trap();
}

// Warp 0, all lanes: the nearest band above `band` whose flag is inclusive, once every band
// between has at least its aggregate. A round reads 32 flags (one 128-byte line), nearest first;
// leading aggregates are passed over and the window moves up past them.
__device__ __forceinline__ uint32_t FindInclusive(const unsigned* flags, uint32_t band, uint32_t ctile) {
  const int lane = threadIdx.x & 31;
  int64_t end = band;  // bands [.., end) not yet passed over
  for (uint32_t spins = 0;; ++spins) {
    const int64_t p = end - 1 - lane;
    // Band 0 is always published inclusive, so lanes above it are never needed.
    const unsigned f = p >= 0 ? LoadAcquire(flags + p) : kInclusive;
    const unsigned valid = __ballot_sync(~0u, f != kNone);
    const unsigned incl = __ballot_sync(~0u, f == kInclusive);
    const int lead = valid == ~0u ? 32 : __ffs(~valid) - 1;  // leading published bands
    if (incl) {
      const int j = __ffs(incl) - 1;
      if (j < lead) return static_cast<uint32_t>(end - 1 - j);
    }
    end -= lead;
    if (lead == 0) {
      if (spins >= 2) __nanosleep(100);
      if (spins >= kMaxSpins) GiveUp(band, ctile, uint64_t(end - 1));
    }
  }
}

template <class T, class Op, int R>
__global__ void __launch_bounds__(kLookThreads, R * sizeof(T) <= 128 ? 4 : 2)
    LookKernel(const T* in, T* out, uint64_t rows, uint64_t cols, bool exclusive, const T* carry_in, T* carry_out,
               unsigned* flags, T* agg, T* inc, unsigned long long* counter, int cw_log2, uint32_t bands,
               uint32_t ctiles) {
  const int tid = threadIdx.x;
  const int cw = 1 << cw_log2, G = kLookThreads >> cw_log2;
  const int c = tid & (cw - 1), g = tid >> cw_log2;
  const bool lead = g == 0;  // the column's thread that looks back and publishes
  const Op op;
  __shared__ unsigned long long s_ticket;
  __shared__ unsigned s_flag, s_from;
  __shared__ T s_part[kLookThreads];  // each thread's fold of its R rows, [g][c]
  __shared__ T s_prefix[kLookThreads];
  const uint64_t tiles = uint64_t(bands) * ctiles, band_rows = uint64_t(G) * R;
  for (;;) {
    if (tid == 0) s_ticket = atomicAdd(counter, 1ull);
    __syncthreads();
    const unsigned long long t = s_ticket;
    if (t >= tiles) break;
    const auto band = static_cast<uint32_t>(t / ctiles), ctile = static_cast<uint32_t>(t % ctiles);
    const uint64_t col = (uint64_t(ctile) << cw_log2) + c;
    const bool col_ok = col < cols;
    const uint64_t row0 = uint64_t(band) * band_rows + uint64_t(g) * R;
    const T* src = in + row0 * cols + col;
    T v[R];
    if (col_ok && row0 + R <= rows) {
#pragma unroll
      for (int i = 0; i < R; ++i) v[i] = src[i * cols];
    } else {
#pragma unroll
      for (int i = 0; i < R; ++i) v[i] = col_ok && row0 + i < rows ? src[i * cols] : Op::identity();
    }
    // The peek at the band above goes out while the rows come in.
    unsigned* my_flags = flags + uint64_t(ctile) * bands;
    if (tid == 0) s_flag = band == 0 ? kInclusive : LoadAcquire(my_flags + band - 1);
    T part = v[0];
#pragma unroll
    for (int i = 1; i < R; ++i) part = op(part, v[i]);
    s_part[tid] = part;
    __syncthreads();
    T total = part;  // the tile's aggregate of column c (lead threads)
    if (lead) {
      for (int k = 1; k < G; ++k) total = op(total, s_part[k * cw + c]);
    }
    T prefix = Op::identity();
    if (band == 0) {
      if (lead && carry_in && col_ok) prefix = carry_in[col];
    } else if (s_flag == kInclusive) {  // the band above is done: the chained hand-off
      if (lead && col_ok) prefix = LoadValue(inc + uint64_t(band - 1) * cols + col);
    } else {
      if (lead && col_ok) agg[uint64_t(band) * cols + col] = total;
      __syncthreads();
      if (tid < 32) {
        if (tid == 0) {
          __threadfence();
          StoreRelaxed(my_flags + band, kAggregate);
        }
        const uint32_t from = FindInclusive(my_flags, band, ctile);
        if (tid == 0) s_from = from;
      }
      __syncthreads();
      if (lead && col_ok) {
        const uint32_t from = s_from;
        prefix = LoadValue(inc + uint64_t(from) * cols + col);
        uint32_t p = from + 1;
        for (; p + 4 <= band; p += 4) {  // independent loads, folded in order
          T a[4];
#pragma unroll
          for (int u = 0; u < 4; ++u) a[u] = LoadValue(agg + uint64_t(p + u) * cols + col);
#pragma unroll
          for (int u = 0; u < 4; ++u) prefix = op(prefix, a[u]);
        }
        for (; p < band; ++p) prefix = op(prefix, LoadValue(agg + uint64_t(p) * cols + col));
      }
    }
    if (lead) {
      const T inclusive = op(prefix, total);
      if (col_ok) {
        if (band + 1 < bands) inc[uint64_t(band) * cols + col] = inclusive;
        if (carry_out && band + 1 == bands) carry_out[col] = inclusive;
      }
      s_prefix[c] = prefix;
    }
    __syncthreads();
    if (tid == 0 && band + 1 < bands) {
      __threadfence();
      StoreRelaxed(my_flags + band, kInclusive);
    }
    // Scan the rows from the prefix above this thread's rows.
    T acc = s_prefix[c];
    for (int k = 0; k < g; ++k) acc = op(acc, s_part[k * cw + c]);
    if (exclusive) {
#pragma unroll
      for (int i = 0; i < R; ++i) {
        const T x = v[i];
        v[i] = acc;
        acc = op(acc, x);
      }
    } else {
#pragma unroll
      for (int i = 0; i < R; ++i) v[i] = acc = op(acc, v[i]);
    }
    T* dst = out + row0 * cols + col;
    if (col_ok && row0 + R <= rows) {
#pragma unroll
      for (int i = 0; i < R; ++i) dst[i * cols] = v[i];
    } else if (col_ok) {
#pragma unroll
      for (int i = 0; i < R; ++i) {
        if (row0 + i < rows) dst[i * cols] = v[i];
      }
    }
  }
}

}  // namespace gpuscan::kernels::axis_detail
