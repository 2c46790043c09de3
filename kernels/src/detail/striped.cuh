// The striped tile layout of the single-pass scan, the reduction and the compaction: each warp
// owns 32 * kItems consecutive elements of the tile, which it moves as kVecs rows of 32
// lane-interleaved 16-byte vectors, so every load and store instruction of the warp covers 512
// contiguous bytes (the blocked layout, a thread's kItems consecutive elements, makes each
// instruction touch 32 separate sectors half each). Element i = v * kVecElems + j of a thread
// sits at tile offset First() + v * kRowStride + j.
#pragma once

#include "tuning.cuh"
#include "warp.cuh"

namespace gpuscan::kernels::detail {

template <LoadHint kHint>
__device__ __forceinline__ uint4 LoadVec(const uint4* p) {
  if constexpr (kHint == LoadHint::kNc) {
    return __ldg(p);
  } else if constexpr (kHint == LoadHint::kStream) {
    return __ldcs(p);
  } else {
    return *p;
  }
}

template <class T, int kItems>
struct StripedLayout {
  static constexpr int kVecElems = 16 / int(sizeof(T));  // elements per 16-byte vector
  static constexpr int kVecs = kItems / kVecElems;       // rows per warp
  static_assert(kItems % kVecElems == 0, "items per thread must fill 16-byte vectors");
  // Offset in the tile of this thread's first element of row 0.
  __device__ __forceinline__ static int First() {
    return WarpId() * kWarpThreads * kItems + LaneId() * kVecElems;
  }
  static constexpr int kRowStride = kWarpThreads * kVecElems;  // elements between rows

  // f(i, off) for each of this thread's items: i = v * kVecElems + j its index in the thread,
  // off = v * kRowStride + j its offset in the tile from First().
  template <class F>
  __device__ __forceinline__ static void ForEachItem(F f) {
#pragma unroll
    for (int v = 0; v < kVecs; ++v) {
#pragma unroll
      for (int j = 0; j < kVecElems; ++j) f(v * kVecElems + j, v * kRowStride + j);
    }
  }

  // kHint: how the 16-byte loads go through the cache (LoadHint).
  template <LoadHint kHint = LoadHint::kDefault>
  __device__ __forceinline__ static void Load(const T* tile, int tile_valid, bool vec, T fill, T (&items)[kItems]) {
    const int first = First();
    if (vec) {
      ItemVec<T, kItems> u;
      const uint4* p = reinterpret_cast<const uint4*>(tile + first);
#pragma unroll
      for (int v = 0; v < kVecs; ++v) u.vec[v] = LoadVec<kHint>(p + v * kWarpThreads);
#pragma unroll
      for (int i = 0; i < kItems; ++i) items[i] = u.item[i];
    } else {
      ForEachItem([&](int i, int off) {
        const int idx = first + off;
        items[i] = idx < tile_valid ? tile[idx] : fill;
      });
    }
  }

  __device__ __forceinline__ static void Store(T* tile, int tile_valid, bool vec, const T (&items)[kItems]) {
    const int first = First();
    if (vec) {
      ItemVec<T, kItems> u;
#pragma unroll
      for (int i = 0; i < kItems; ++i) u.item[i] = items[i];
      uint4* p = reinterpret_cast<uint4*>(tile + first);
#pragma unroll
      for (int v = 0; v < kVecs; ++v) p[v * kWarpThreads] = u.vec[v];
    } else {
      ForEachItem([&](int i, int off) {
        const int idx = first + off;
        if (idx < tile_valid) tile[idx] = items[i];
      });
    }
  }
};

// The block-level step of a striped tile's scan. row_sum(v): the combination of this thread's
// elements of row v. Returns the tile's combination (in every thread) and sets row_excl[v] to the
// combination of the tile's elements before this thread's row v: each row is scanned across the
// warp, the warp's rows chain in order, then the warps (their totals through s_warp_total, one
// per warp; one barrier).
template <class T, class Op, int kVecs, int kWarps, class RowSum>
__device__ __forceinline__ T StripedRowPrefixes(RowSum row_sum, T (&row_excl)[kVecs], T (&s_warp_total)[kWarps]) {
  const Op op;
  const int lane = LaneId(), warp = WarpId();
  T row_incl[kVecs];
#pragma unroll
  for (int v = 0; v < kVecs; ++v) row_incl[v] = WarpInclusiveScan(row_sum(v), op);
  T warp_run = Op::identity();  // this warp's rows before row v
#pragma unroll
  for (int v = 0; v < kVecs; ++v) {
    const T lane_excl = ShflUp(row_incl[v], 1);
    row_excl[v] = lane == 0 ? warp_run : op(warp_run, lane_excl);
    warp_run = op(warp_run, ShflIdx(row_incl[v], kWarpThreads - 1));
  }
  if (lane == 0) s_warp_total[warp] = warp_run;
  __syncthreads();
  T before = Op::identity();
  T total = s_warp_total[0];
#pragma unroll
  for (int w = 0; w < kWarps; ++w) {
    const T t = s_warp_total[w];
    if (w < warp) before = op(before, t);
    if (w > 0) total = op(total, t);
  }
#pragma unroll
  for (int v = 0; v < kVecs; ++v) row_excl[v] = op(before, row_excl[v]);
  return total;
}

}  // namespace gpuscan::kernels::detail
