// The canonical tree's block-level folds (canonical_tree.h): a segment's fold, the block's
// Hillis-Steele over its 256 segment totals, and one node of it by one warp.
#pragma once

#include "canonical_tile.cuh"
#include "warp.cuh"

namespace gpuscan::kernels::detail::canonical {

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
__device__ __forceinline__ T BlockHillisSteele(T v, T (&hs)[2][kThreads]) {
  const Op op;
  const int tid = threadIdx.x;
  int buf = 0;
#pragma unroll
  for (int d = 1; d < kThreads; d <<= 1, buf ^= 1) {
    hs[buf][tid] = v;
    __syncthreads();
    if (tid >= d) v = op(hs[buf][tid - d], v);
  }
  return v;
}

// y[p] of the last level of BlockHillisSteele over vals[0..p] (p < 256), by one warp, valid in
// lane 0: the same operations on the same operands, only the nodes y[p] does not depend on are
// skipped. Lane L takes positions p - 8L - 7 .. p - 8L: levels d = 1, 2, 4 in registers, then
// d = 8 .. 128 by shuffles (lane L's node at level d reads lane L + d/8's).
template <class T, class Op>
__device__ __forceinline__ T WarpConeHillisSteele(const T* vals, int p) {
  const Op op;
  const int top = p - 8 * LaneId();
  T v[8];
#pragma unroll
  for (int k = 0; k < 8; ++k) v[k] = top - k >= 0 ? vals[top - k] : T{};
  T w[4];
#pragma unroll
  for (int m = 0; m < 4; ++m) w[m] = top - 2 * m >= 1 ? op(v[2 * m + 1], v[2 * m]) : v[2 * m];
  T u[2];
#pragma unroll
  for (int n = 0; n < 2; ++n) u[n] = top - 4 * n >= 2 ? op(w[2 * n + 1], w[2 * n]) : w[2 * n];
  T z = top >= 4 ? op(u[1], u[0]) : u[0];
#pragma unroll
  for (int s = 1, d = 8; d < kThreads; s <<= 1, d <<= 1) {
    const T y = ShflDown(z, s);
    if (top >= d) z = op(y, z);
  }
  return z;
}
}  // namespace gpuscan::kernels::detail::canonical
