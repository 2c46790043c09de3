// The widening scans (gpuscan/kernels/scan_widen.h) on the plain scans' agents:
//   integers         LookBackScan (dispatch.cuh) with In != T: the bulk look-back kernel reads the
//                    narrow tile by a bulk copy and converts it in shared-memory reads
//                    (agent_single_pass_bulk.cuh ArrayBulkIO), tuned by WidenScanTuning.
//                    Signed and unsigned outputs of one size share their kernels: a C cast into
//                    either gives the same bits, and SUM wraps alike.
//   float16->float32 the canonical tree (canonical_tree.h): OnePassKernel with In = Float16 for
//                    the call's whole tiles, launched as the canonical scan's (LaunchOnePass,
//                    dispatch_canonical.cuh), then one block (WidenTailKernel) for the partial
//                    last tile and the carry out, from the state the one pass leaves. The state
//                    lives in the temp storage, behind the tile words.
#pragma once

#include <algorithm>
#include <type_traits>

#include "dispatch.cuh"
#include "dispatch_canonical.cuh"
#include "gpuscan/kernels/canonical_tree.h"
#include "gpuscan/kernels/scan_widen.h"

namespace gpuscan::kernels::detail {

namespace canonical {

// The state before a call's one pass when it has a carry in: C_0 = carry (a call without one
// starts "fresh": the one pass writes the state without reading it).
template <class T>
__global__ void WidenStateInitKernel(const T* carry_in, CanonicalState<T>* state) {
  state->carry = *carry_in;
  state->has_carry = 1;
}

// The call's last, partial tile (m < 4096 elements at in / out, global tile index `tiles` of the
// call) and the carry out, as canon::ScanTile and TreeState::NextPrefix compute them:
//   TP = C ⊕ P[j-1] (j = tiles % 256: the state's carry and aggregates, which the one pass left;
//   with no whole tile the carry in), then each segment's SP = TP ⊕ Q[k-1], folded left.
// carry_out: the exclusive value element m would get (TP when m == 0; SP of the next segment
// when m ends one; else the inclusive value of element m - 1). Then the state is zeroed (the
// temp contract: the bytes are left as the tile words around them expect).
template <class T, class Op, class In>
__global__ void __launch_bounds__(kThreads)
    WidenTailKernel(const In* in, T* out, int m, int j, bool exclusive, const T* carry_in, CanonicalState<T>* state,
                    T* carry_out) {
  __shared__ T s_aggs[kThreads];
  __shared__ T hs[2][kThreads];
  __shared__ T s_q[kThreads];
  __shared__ T s_tp;
  __shared__ int s_has;
  const Op op;
  const int tid = threadIdx.x;
  if (state != nullptr && tid < j) s_aggs[tid] = state->aggs[tid];
  __syncthreads();
  if (tid < kWarpThreads) {
    int has = 0;
    T c{};
    if (state != nullptr) {
      has = state->has_carry;
      c = state->carry;
    } else if (carry_in != nullptr) {
      has = 1;
      c = *carry_in;
    }
    if (j > 0) {  // warp-uniform: the cone takes the whole warp
      const T p = WarpConeHillisSteele<T, Op>(s_aggs, j - 1);
      c = has ? op(c, p) : p;
      has = 1;
    }
    if (tid == 0) {
      s_tp = c;
      s_has = has;
    }
  }
  __syncthreads();
  if (state != nullptr) {  // read: leave it zero
    state->aggs[tid] = T{};
    if (tid == 0) {
      state->carry = T{};
      state->has_carry = 0;
    }
  }
  const int b = tid * kItems;
  const int cnt = m - b <= 0 ? 0 : (m - b >= kItems ? kItems : m - b);
  T x[kItems];
#pragma unroll
  for (int i = 0; i < kItems; ++i) x[i] = i < cnt ? Widen<In, T>::Convert(in[b + i]) : T{};
  T fold = x[0];
#pragma unroll
  for (int i = 1; i < kItems; ++i) {
    if (i < cnt) fold = op(fold, x[i]);
  }
  // Q over the segments: positions past the last segment hold anything; Q[k] reads only 0..k.
  const T q = BlockHillisSteele<T, Op>(fold, hs);
  s_q[tid] = q;
  __syncthreads();
  const bool tp_has = s_has != 0;
  const T tp = s_tp;
  if (cnt > 0) {
    bool has = tp_has;
    T v = tp;
    if (tid > 0) {
      v = has ? op(v, s_q[tid - 1]) : s_q[tid - 1];
      has = true;
    }
#pragma unroll
    for (int i = 0; i < kItems; ++i) {
      if (i < cnt) {
        if (exclusive) out[b + i] = has ? v : Op::identity();
        v = has ? op(v, x[i]) : x[i];
        has = true;
        if (!exclusive) out[b + i] = v;
      }
    }
    if (carry_out != nullptr && cnt < kItems && b + cnt == m) *carry_out = v;  // m ends inside this segment
  }
  if (carry_out != nullptr && m % kItems == 0) {
    if (m == 0) {
      if (tid == 0) *carry_out = tp_has ? tp : Op::identity();
    } else if (tid == m / kItems - 1) {  // SP of segment m / 16 = TP ⊕ Q[m / 16 - 1]
      *carry_out = tp_has ? op(tp, q) : q;
    }
  }
}

// The widening canonical scan: whole tiles by the one pass, the rest by WidenTailKernel.
template <class In, class T, class Op, int kStages = CanonicalWidenTuning<kTunedArch, sizeof(In), sizeof(T)>::kStages>
cudaError_t WidenCanonicalScan(void* d_temp, std::size_t& temp_bytes, const In* in, T* out, uint64_t n,
                               bool exclusive, const T* carry_in, T* carry_out, cudaStream_t stream) {
  const uint64_t tiles = n / kTile;
  const auto m = static_cast<int>(n % kTile);
  const std::size_t words = Round16(OnePassBytes(OnePassLaunchTiles(tiles)));
  const std::size_t body = words + Round16(sizeof(CanonicalState<T>));
  TempView view;
  cudaError_t rc;
  if (StartCall<T, Op>(d_temp, temp_bytes, body, n == 0 || (in != nullptr && out != nullptr), n, carry_in, carry_out,
                       stream, view, rc)) {
    return rc;
  }
  if (tiles > 0x7fffffffu) return cudaErrorInvalidValue;
  auto* state = reinterpret_cast<CanonicalState<T>*>(view.body + words);
  if (tiles > 0) {
    if (carry_in != nullptr) {
      WidenStateInitKernel<T><<<1, 1, 0, stream>>>(carry_in, state);
      GPUSCAN_CHECK_LAUNCH();
    }
    GPUSCAN_TRY((LaunchOnePass<T, Op, kStages, In>(in, out, tiles, 0, carry_in == nullptr, exclusive, view, state,
                                                   stream)));
  }
  if (m > 0 || carry_out != nullptr || tiles > 0) {  // tiles > 0: the state is zeroed there
    WidenTailKernel<T, Op, In><<<1, kThreads, 0, stream>>>(in + tiles * kTile, out + tiles * kTile, m,
                                                           static_cast<int>(tiles % kThreads), exclusive, carry_in,
                                                           tiles > 0 ? state : nullptr, carry_out);
    GPUSCAN_CHECK_LAUNCH();
  }
  return cudaSuccess;
}

}  // namespace canonical

// The accumulator a widening scan of Out runs in: integers in the signed type of Out's size
// (the same bits as the unsigned one: Widen is a C cast, SUM wraps), so each (In, size) has one
// set of kernels.
template <class Out>
using WidenAcc = std::conditional_t<std::is_integral_v<Out>, std::make_signed_t<Out>, Out>;

template <class In, class Out, class Op>
cudaError_t ScanWideningImpl(void* d_temp, std::size_t& temp_bytes, const In* in, Out* out, uint64_t n,
                             bool exclusive, const Out* carry_in, Out* carry_out, cudaStream_t stream) {
  static_assert(std::is_same_v<Op, ops::Sum<Out>>, "widening scans are SUM only");
  if constexpr (canon::kUsesTree<Out, Op>) {
    return canonical::WidenCanonicalScan<In, Out, Op>(d_temp, temp_bytes, in, out, n, exclusive, carry_in, carry_out,
                                                      stream);
  } else {
    using Acc = WidenAcc<Out>;
    static_assert(sizeof(Acc) == sizeof(Out));
    using B = WidenScanTuning<kTunedArch, sizeof(In), sizeof(Out)>;
    return LookBackScan<Acc, ops::Sum<Acc>, B, In>(d_temp, temp_bytes, in, reinterpret_cast<Acc*>(out), n, exclusive,
                                                   reinterpret_cast<const Acc*>(carry_in),
                                                   reinterpret_cast<Acc*>(carry_out), stream);
  }
}

}  // namespace gpuscan::kernels::detail

namespace gpuscan::kernels {

template <class In, class Out, class Op>
cudaError_t ScanWidening(void* d_temp, std::size_t& temp_bytes, const In* d_in, Out* d_out, uint64_t n,
                         bool exclusive, const Out* d_carry_in, Out* d_carry_out, cudaStream_t stream) {
  return detail::ScanWideningImpl<In, Out, Op>(d_temp, temp_bytes, d_in, d_out, n, exclusive, d_carry_in,
                                               d_carry_out, stream);
}

}  // namespace gpuscan::kernels

#define GPUSCAN_INSTANTIATE_SCAN_WIDENING(IN, OUT)                                                \
  template cudaError_t gpuscan::kernels::ScanWidening<IN, OUT, gpuscan::ops::Sum<OUT>>(           \
      void*, std::size_t&, const IN*, OUT*, uint64_t, bool, const OUT*, OUT*, cudaStream_t);
