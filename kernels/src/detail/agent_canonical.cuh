// The canonical float tree on the device (see gpuscan/kernels/canonical_tree.h for the
// definition, which the host functions there compute too). Every operation below mirrors one
// of those host functions: same operands, same association.
//
//   TileAggKernel   one block per tile: segment folds (16 items per thread), Hillis-Steele
//                   over the 256 totals, A = Q[255]
//   SuperKernel     one block per super touched: Hillis-Steele over its tile aggregates (the
//                   first super's earlier tiles come from the state), each new tile's local
//                   prefix P[j-1], and the super's total when it completes here
//   CarryKernel     one block: the sequential carry over the supers touched; state update
//   ScanTilesKernel one block per tile: the tile again, from its prefix C ⊕ P[j-1]
#pragma once

#include "common.cuh"
#include "gpuscan/kernels/canonical_scan.h"

namespace gpuscan::kernels::detail::canonical {

constexpr int kThreads = 256;  // = segments per tile = tiles per super
constexpr int kItems = 16;     // = items per segment
constexpr int kTile = kThreads * kItems;
constexpr int kPadded = kTile + kTile / 32;

// One padding word per 32 keeps a thread's 16 consecutive items off each other's banks.
__device__ __forceinline__ int Pad(int i) { return i + (i >> 5); }

template <class T>
struct TileSmem {
  T items[kPadded];
  T hs[2][kThreads];
};

// Striped (coalesced) loads, then each thread takes its segment's 16 consecutive items.
template <class T>
__device__ __forceinline__ void LoadSegment(const T* in, T (&x)[kItems], TileSmem<T>& sm) {
  const int tid = threadIdx.x;
#pragma unroll
  for (int r = 0; r < kItems; ++r) sm.items[Pad(r * kThreads + tid)] = in[r * kThreads + tid];
  __syncthreads();
#pragma unroll
  for (int i = 0; i < kItems; ++i) x[i] = sm.items[Pad(tid * kItems + i)];
}

// The inverse: each thread's 16 results, stored striped. sm.items must be free (a barrier
// since the last LoadSegment read).
template <class T>
__device__ __forceinline__ void StoreSegment(T* out, const T (&y)[kItems], TileSmem<T>& sm) {
  const int tid = threadIdx.x;
#pragma unroll
  for (int i = 0; i < kItems; ++i) sm.items[Pad(tid * kItems + i)] = y[i];
  __syncthreads();
#pragma unroll
  for (int r = 0; r < kItems; ++r) out[r * kThreads + tid] = sm.items[Pad(r * kThreads + tid)];
}

template <class T, class Op>
__device__ __forceinline__ T SegmentFold(const T (&x)[kItems]) {
  const Op op;
  T t = x[0];
#pragma unroll
  for (int i = 1; i < kItems; ++i) t = op(t, x[i]);
  return t;
}

// Inclusive Hillis-Steele over the block's 256 values, level by level as canon::HillisSteele
// (y[i] = y[i-d] op y[i], all reads from the level before). Double-buffered: one barrier per
// level suffices, since a buffer is rewritten two levels later, after a barrier every reader
// of it has passed. Leaves `buf` = the next free buffer parity (8 levels: 0).
template <class T, class Op>
__device__ __forceinline__ T BlockHillisSteele(T v, TileSmem<T>& sm) {
  const Op op;
  const int tid = threadIdx.x;
  int buf = 0;
#pragma unroll
  for (int d = 1; d < kThreads; d <<= 1, buf ^= 1) {
    sm.hs[buf][tid] = v;
    __syncthreads();
    if (tid >= d) v = op(sm.hs[buf][tid - d], v);
  }
  return v;
}

// The value of thread tid - 1 (undefined for thread 0), through buffer 0 (free after 8 levels).
template <class T>
__device__ __forceinline__ T FromPrevious(T v, TileSmem<T>& sm) {
  const int tid = threadIdx.x;
  sm.hs[0][tid] = v;
  __syncthreads();
  return tid > 0 ? sm.hs[0][tid - 1] : v;
}

template <class T, class Op>
__global__ void __launch_bounds__(kThreads) TileAggKernel(const T* in, T* aggs) {
  __shared__ TileSmem<T> sm;
  T x[kItems];
  LoadSegment(in + static_cast<uint64_t>(blockIdx.x) * kTile, x, sm);
  const T q = BlockHillisSteele<T, Op>(SegmentFold<T, Op>(x), sm);
  if (threadIdx.x == kThreads - 1) aggs[blockIdx.x] = q;
}

// Super-local positions p = 0, 1, ...: p < j0 are the state's tiles, then the call's tiles.
template <class T, class Op>
__global__ void __launch_bounds__(kThreads)
    SuperKernel(const T* aggs, uint64_t tiles, int j0, const CanonicalState<T>* state, T* local_prefix, T* totals) {
  __shared__ TileSmem<T> sm;
  const int tid = threadIdx.x;
  const uint64_t p = static_cast<uint64_t>(blockIdx.x) * kThreads + tid;
  const uint64_t end = j0 + tiles;
  T a = Op::identity();  // past the end: never read by a position before it
  if (p < static_cast<uint64_t>(j0)) {
    a = state->aggs[tid];
  } else if (p < end) {
    a = aggs[p - j0];
  }
  const T pv = BlockHillisSteele<T, Op>(a, sm);
  const T prev = FromPrevious(pv, sm);
  if (p >= static_cast<uint64_t>(j0) && p < end && tid > 0) local_prefix[p - j0] = prev;
  if (tid == kThreads - 1 && p < end) totals[blockIdx.x] = pv;
}

// supers: blocks of SuperKernel; the last one is complete iff (j0 + tiles) % 256 == 0.
template <class T, class Op>
__global__ void __launch_bounds__(kThreads)
    CarryKernel(const T* aggs, uint64_t tiles, int j0, uint32_t supers, const T* totals, T* carries,
                int32_t* has_carries, CanonicalState<T>* state) {
  const Op op;
  const uint64_t end = j0 + tiles;
  const bool last_complete = end % kThreads == 0;
  if (threadIdx.x == 0) {
    T c = state->carry;
    int32_t has = state->has_carry;
    for (uint32_t b = 0; b < supers; ++b) {
      carries[b] = c;
      has_carries[b] = has;
      if (b + 1 < supers || last_complete) {
        c = has ? op(c, totals[b]) : totals[b];
        has = 1;
      }
    }
    state->carry = c;
    state->has_carry = has;
  }
  if (!last_complete) {  // keep the raw aggregates of the super the call ends in
    const uint64_t p = static_cast<uint64_t>(supers - 1) * kThreads + threadIdx.x;
    if (p >= static_cast<uint64_t>(j0) && p < end) state->aggs[threadIdx.x] = aggs[p - j0];
  }
}

template <class T, class Op>
__global__ void __launch_bounds__(kThreads)
    ScanTilesKernel(const T* in, T* out, uint64_t first_tile, int j0, bool exclusive, const T* local_prefix,
                    const T* carries, const int32_t* has_carries) {
  __shared__ TileSmem<T> sm;
  const Op op;
  const int tid = threadIdx.x;
  const uint64_t t = blockIdx.x;
  const uint64_t offset = t * kTile;
  T x[kItems];
  LoadSegment(in + offset, x, sm);
  const T q = BlockHillisSteele<T, Op>(SegmentFold<T, Op>(x), sm);
  const T q_prev = FromPrevious(q, sm);
  // The tile's prefix TP = C ⊕ P[j-1], then the segment's SP = TP ⊕ Q[k-1].
  const uint64_t pos = j0 + t;
  const uint64_t b = pos / kThreads;
  const int j = static_cast<int>(pos % kThreads);
  bool has = has_carries[b] != 0;
  T sp = carries[b];
  if (j > 0) {
    sp = has ? op(sp, local_prefix[t]) : local_prefix[t];
    has = true;
  }
  if (tid > 0) {
    sp = has ? op(sp, q_prev) : q_prev;
    has = true;
  }
  (void)first_tile;
  T y[kItems];
  if (exclusive) {
    T v = has ? sp : Op::identity();
    y[0] = v;
#pragma unroll
    for (int i = 1; i < kItems; ++i) {
      v = (has || i > 1) ? op(v, x[i - 1]) : x[i - 1];
      y[i] = v;
    }
  } else {
    T v = has ? op(sp, x[0]) : x[0];
    y[0] = v;
#pragma unroll
    for (int i = 1; i < kItems; ++i) {
      v = op(v, x[i]);
      y[i] = v;
    }
  }
  StoreSegment(out + offset, y, sm);
}

inline std::size_t Round16(std::size_t b) { return (b + 15) & ~std::size_t{15}; }

template <class T>
struct Layout {
  std::size_t aggs, prefix, totals, carries, has, bytes;
  Layout(uint64_t tiles, uint64_t supers) {
    aggs = 0;
    prefix = Round16(tiles * sizeof(T));
    totals = prefix + Round16(tiles * sizeof(T));
    carries = totals + Round16(supers * sizeof(T));
    has = carries + Round16(supers * sizeof(T));
    bytes = has + Round16(supers * sizeof(int32_t));
  }
};

template <class T, class Op>
cudaError_t CanonicalScanImpl(void* d_temp, std::size_t& temp_bytes, const T* in, T* out, uint64_t tiles,
                              uint64_t first_tile, bool exclusive, CanonicalState<T>* state,
                              cudaStream_t stream) {
  const int j0 = static_cast<int>(first_tile % kThreads);
  const Layout<T> layout(tiles, DivUp(tiles, kThreads) + 1);
  if (d_temp == nullptr) {
    temp_bytes = TempBytesFor(layout.bytes);
    return cudaSuccess;
  }
  if (tiles == 0) return cudaSuccess;
  if (in == nullptr || state == nullptr) return cudaErrorInvalidValue;
  TempView view;
  GPUSCAN_TRY(ViewTemp(d_temp, temp_bytes, layout.bytes, view));
  T* aggs = reinterpret_cast<T*>(view.body + layout.aggs);
  T* prefix = reinterpret_cast<T*>(view.body + layout.prefix);
  T* totals = reinterpret_cast<T*>(view.body + layout.totals);
  T* carries = reinterpret_cast<T*>(view.body + layout.carries);
  auto* has = reinterpret_cast<int32_t*>(view.body + layout.has);
  const auto supers = static_cast<uint32_t>(DivUp(j0 + tiles, kThreads));
  if (tiles > 0x7fffffffu) return cudaErrorInvalidValue;
  const auto grid = static_cast<unsigned>(tiles);
  TileAggKernel<T, Op><<<grid, kThreads, 0, stream>>>(in, aggs);
  GPUSCAN_CHECK_LAUNCH();
  SuperKernel<T, Op><<<supers, kThreads, 0, stream>>>(aggs, tiles, j0, state, prefix, totals);
  GPUSCAN_CHECK_LAUNCH();
  CarryKernel<T, Op><<<1, kThreads, 0, stream>>>(aggs, tiles, j0, supers, totals, carries, has, state);
  GPUSCAN_CHECK_LAUNCH();
  if (out != nullptr) {
    ScanTilesKernel<T, Op><<<grid, kThreads, 0, stream>>>(in, out, first_tile, j0, exclusive, prefix, carries, has);
    GPUSCAN_CHECK_LAUNCH();
  }
  // The temp-storage contract: leave the body as zero as it came.
  return cudaMemsetAsync(view.body, 0, layout.bytes, stream);
}

}  // namespace gpuscan::kernels::detail::canonical

namespace gpuscan::kernels {

template <class T, class Op>
cudaError_t CanonicalScan(void* d_temp, std::size_t& temp_bytes, const T* d_in, T* d_out, uint64_t tiles,
                          uint64_t first_tile, bool exclusive, CanonicalState<T>* d_state, cudaStream_t stream) {
  return detail::canonical::CanonicalScanImpl<T, Op>(d_temp, temp_bytes, d_in, d_out, tiles, first_tile, exclusive,
                                                     d_state, stream);
}

}  // namespace gpuscan::kernels

#define GPUSCAN_INSTANTIATE_CANONICAL(T, OP)                                                     \
  template cudaError_t gpuscan::kernels::CanonicalScan<T, gpuscan::ops::OP<T>>(                  \
      void*, std::size_t&, const T*, T*, uint64_t, uint64_t, bool, gpuscan::kernels::CanonicalState<T>*, \
      cudaStream_t);
