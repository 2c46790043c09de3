// The canonical float tree's reduction on the device (see gpuscan/kernels/canonical_tree.h for the
// definition, which the host functions there compute too). Every operation below mirrors one
// of those host functions: same operands, same association.
//
//   TileAggKernel   one block per tile: segment folds (16 items per thread), Hillis-Steele
//                   over the 256 totals, A = Q[255]
//   SuperKernel     one block per super touched: Hillis-Steele over its tile aggregates (the
//                   first super's earlier tiles come from the state), the super's total
//   CarryKernel     one block: the sequential carry over the supers touched, into the state
// Those three serve reductions (the input read once). Scans take OnePassKernel
// (agent_canonical.cuh), which reads the input once too and computes the same operations.
#pragma once

#include "canonical_block_tree.cuh"
#include "canonical_tile.cuh"
#include "gpuscan/kernels/canonical_scan.h"

namespace gpuscan::kernels::detail::canonical {

template <class T, class Op>
__global__ void __launch_bounds__(kThreads) TileAggKernel(const T* in, T* aggs) {
  __shared__ TileSmem<T> sm;
  T x[kItems];
  LoadSegment(in + static_cast<uint64_t>(blockIdx.x) * kTile, x, sm);
  const T q = BlockHillisSteele<T, Op>(SegmentFold<T, Op>(x), sm.hs);
  if (threadIdx.x == kThreads - 1) aggs[blockIdx.x] = q;
}

// Super-local positions p = 0, 1, ...: p < j0 are the state's tiles, then the call's tiles.
template <class T, class Op>
__global__ void __launch_bounds__(kThreads)
    SuperKernel(const T* aggs, uint64_t tiles, int j0, const CanonicalState<T>* state, T* totals) {
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
  const T pv = BlockHillisSteele<T, Op>(a, sm.hs);
  if (tid == kThreads - 1 && p < end) totals[blockIdx.x] = pv;
}

// supers: blocks of SuperKernel; the last one is complete iff (j0 + tiles) % 256 == 0.
template <class T, class Op>
__global__ void __launch_bounds__(kThreads)
    CarryKernel(const T* aggs, uint64_t tiles, int j0, uint32_t supers, const T* totals, CanonicalState<T>* state,
                bool fresh) {
  const Op op;
  const uint64_t end = j0 + tiles;
  const bool last_complete = end % kThreads == 0;
  if (threadIdx.x == 0) {
    T c = fresh ? T{} : state->carry;
    int32_t has = fresh ? 0 : state->has_carry;
    for (uint32_t b = 0; b < supers; ++b) {
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

}  // namespace gpuscan::kernels::detail::canonical
