// Warp primitives: shuffle scans and reductions that keep the operands in index order (left
// operand = lower index), so non-commutative operators would scan correctly too.
#pragma once

#include "common.cuh"

namespace gpuscan::kernels::detail {

__device__ __forceinline__ int LaneId() { return int(threadIdx.x) & (kWarpThreads - 1); }
__device__ __forceinline__ int WarpId() { return int(threadIdx.x) / kWarpThreads; }

// Inclusive scan across the warp's lanes (Kogge-Stone over __shfl_up_sync, 5 steps).
template <class T, class Op>
__device__ __forceinline__ T WarpInclusiveScan(T x, Op op) {
  const int lane = LaneId();
#pragma unroll
  for (int d = 1; d < kWarpThreads; d <<= 1) {
    const T y = ShflUp(x, d);
    if (lane >= d) x = op(y, x);
  }
  return x;
}

// Reduction across the warp; the result is valid in lane 0 (combined in lane order).
template <class T, class Op>
__device__ __forceinline__ T WarpReduceToLane0(T x, Op op) {
  const int lane = LaneId();
#pragma unroll
  for (int d = 1; d < kWarpThreads; d <<= 1) {
    const T y = ShflDown(x, d);
    if (lane + d < kWarpThreads) x = op(x, y);
  }
  return x;
}

}  // namespace gpuscan::kernels::detail
