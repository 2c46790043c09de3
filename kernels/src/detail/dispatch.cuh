// Host dispatch of the library's own algorithms: sizes temp storage (two-phase), the grid, and
// splits calls longer than one launch may take; every launch is checked.
#pragma once

#include <algorithm>
#include <type_traits>

#include "common.cuh"
#include "gpuscan/kernels/compact.h"
#include "gpuscan/kernels/reduce.h"
#include "gpuscan/kernels/scan.h"
#include "agent_compact.cuh"
#include "agent_rts.cuh"
#include "agent_single_pass.cuh"
#include "device_facts.cuh"
#include "tuning.cuh"

namespace gpuscan::kernels::detail {

// The CUB peers, defined in the *_cub.cu files.
template <class T, class Op>
cudaError_t CubScan(void* d_temp, std::size_t& temp_bytes, const T* in, T* out, uint64_t n,
                    bool exclusive, const T* carry_in, T* carry_out, cudaStream_t stream);
template <class T, class Op>
cudaError_t CubReduce(void* d_temp, std::size_t& temp_bytes, const T* in, uint64_t n,
                      const T* carry_in, T* out, cudaStream_t stream);
template <class T>
cudaError_t CubCompact(void* d_temp, std::size_t& temp_bytes, const T* in, const uint8_t* flags,
                       Predicate<T> pred, uint64_t n, int64_t index_base, T* out_values,
                       int64_t* out_indices, uint64_t* num_kept, cudaStream_t stream);

// A T-typed view of one of the header's 8-byte slots.
template <class T>
T* Slot(TempHeader* h, int i) {
  return reinterpret_cast<T*>(&h->slot[i]);
}

template <class T, class Op>
cudaError_t PassCarry(const T* carry_in, T* carry_out, cudaStream_t stream) {
  if (carry_out == nullptr) return cudaSuccess;
  CarryPassKernel<T, Op><<<1, 1, 0, stream>>>(carry_in, carry_out);
  GPUSCAN_CHECK_LAUNCH();
  return cudaSuccess;
}

// How a call of the scans and reductions starts: a null d_temp asks for the temp size
// (TempBytesFor(body)); bad pointers are refused; no elements pass carry_in through to
// carry_out; else `view` is the call's temp storage. True: the call is answered, `rc` its status.
template <class T, class Op>
bool StartCall(void* d_temp, std::size_t& temp_bytes, std::size_t body, bool pointers_ok, uint64_t n,
               const T* carry_in, T* carry_out, cudaStream_t stream, TempView& view, cudaError_t& rc) {
  rc = cudaSuccess;
  if (d_temp == nullptr) {
    temp_bytes = TempBytesFor(body);
    return true;
  }
  if (!pointers_ok) {
    rc = cudaErrorInvalidValue;
    return true;
  }
  if (n == 0) {
    rc = PassCarry<T, Op>(carry_in, carry_out, stream);
    return true;
  }
  rc = ViewTemp(d_temp, temp_bytes, body, view);
  return rc != cudaSuccess;
}

// ---------------------------------------------------------------------------------------------
// Single-pass scan (decoupled look-back / chained); kBulk: the look-back kernel that keeps its
// tile in shared memory (agent_single_pass_bulk.cuh). In: the input's element type (the bulk
// kernel converts it to T as it reads, scan_widen.h); T for the plain scans.
template <class T, class Op, class Policy, bool kChained, bool kBulk = false, class In = T>
cudaError_t SinglePassScan(void* d_temp, std::size_t& temp_bytes, const In* in, T* out, uint64_t n,
                           bool exclusive, const T* carry_in, T* carry_out, cudaStream_t stream) {
  static_assert(kBulk || std::is_same_v<In, T>, "only the bulk kernel converts its input");
  const std::size_t body = SinglePassBody<Policy>(n);
  TempView view;
  cudaError_t rc;
  if (StartCall<T, Op>(d_temp, temp_bytes, body, n == 0 || (in != nullptr && out != nullptr), n, carry_in, carry_out,
                       stream, view, rc)) {
    return rc;
  }
  using IO = std::conditional_t<kBulk, ArrayBulkIO<T, Op, Policy::kItems, Policy::kTile, In>,
                                ArrayTileIO<T, Op, Policy::kItems>>;
  return LaunchSinglePass<T, Op, Policy, kChained, IO, kBulk>(view, n, exclusive, carry_in, carry_out, stream,
                                                       [&](uint64_t off, const T*) { return IO{in + off, out + off}; });
}

// The decoupled look-back scan (ScanAlgorithm::kDecoupledLookback) under the bulk tuning B
// (BulkScanTuning's members: Tiny up to kTinyUpTo elements, Small, then Large from kLargeFrom,
// or Wide on devices of more than kWideAboveGBs). In as SinglePassScan's.
template <class T, class Op, class B, class In = T>
cudaError_t LookBackScan(void* d_temp, std::size_t& temp_bytes, const In* in, T* out, uint64_t n, bool exclusive,
                         const T* carry_in, T* carry_out, cudaStream_t stream) {
  // The size asked for serves every call up to n (BulkScanTuning): Small's tiles for n, and
  // Tiny's (shorter) for the calls of at most kTinyUpTo.
  static_assert(B::Large::kTile >= B::Small::kTile && B::Wide::kTile >= B::Small::kTile,
                "no more tile words than Small's for the same n");
  static_assert(B::kTinyUpTo <= uint64_t(kIndexedTilesMax) * B::Tiny::kTile,
                "tiny calls take their tiles by block index (their gain, bench/NOTES.md)");
  if constexpr (!std::is_same_v<typename B::Tiny, typename B::Small>) {
    if (d_temp == nullptr) {
      std::size_t tiny = 0;
      GPUSCAN_TRY((SinglePassScan<T, Op, typename B::Tiny, false, true, In>(
          nullptr, tiny, in, out, std::min<uint64_t>(n, B::kTinyUpTo), exclusive, carry_in, carry_out, stream)));
      GPUSCAN_TRY((SinglePassScan<T, Op, typename B::Small, false, true, In>(d_temp, temp_bytes, in, out, n, exclusive,
                                                                             carry_in, carry_out, stream)));
      temp_bytes = std::max(temp_bytes, tiny);
      return cudaSuccess;
    }
    if (n <= B::kTinyUpTo) {
      return SinglePassScan<T, Op, typename B::Tiny, false, true, In>(d_temp, temp_bytes, in, out, n, exclusive,
                                                                      carry_in, carry_out, stream);
    }
  }
  if constexpr (!std::is_same_v<typename B::Small, typename B::Large>) {
    if (d_temp != nullptr && n >= B::kLargeFrom) {
      double peak_gbs = 0;
      GPUSCAN_TRY(PeakDramGBs(peak_gbs));
      if (peak_gbs > kWideAboveGBs) {
        return SinglePassScan<T, Op, typename B::Wide, false, true, In>(d_temp, temp_bytes, in, out, n, exclusive,
                                                                        carry_in, carry_out, stream);
      }
      return SinglePassScan<T, Op, typename B::Large, false, true, In>(d_temp, temp_bytes, in, out, n, exclusive,
                                                                       carry_in, carry_out, stream);
    }
  }
  return SinglePassScan<T, Op, typename B::Small, false, true, In>(d_temp, temp_bytes, in, out, n, exclusive, carry_in,
                                                                   carry_out, stream);
}

// ---------------------------------------------------------------------------------------------
// Reduce-then-scan with BlockScan<kAlgo> at the block level.
template <class T, class Op, class Policy, BlockScanAlgo kAlgo>
cudaError_t RtsScan(void* d_temp, std::size_t& temp_bytes, const T* in, T* out, uint64_t n,
                    bool exclusive, const T* carry_in, T* carry_out, cudaStream_t stream) {
  const EvenShare share = MakeEvenShare(DivUp(n, Policy::kTile), Policy::kMaxBlocks);
  const std::size_t body = std::size_t(share.blocks) * sizeof(T);
  TempView view;
  cudaError_t rc;
  if (StartCall<T, Op>(d_temp, temp_bytes, body, n == 0 || (in != nullptr && out != nullptr), n, carry_in, carry_out,
                       stream, view, rc)) {
    return rc;
  }
  T* partials = reinterpret_cast<T*>(view.body);
  RtsReduceKernel<T, Op, Policy><<<share.blocks, Policy::kThreads, 0, stream>>>(in, n, share, partials);
  GPUSCAN_CHECK_LAUNCH();
  RtsScanPartialsKernel<T, Op, Policy::kThreads, kAlgo>
      <<<1, Policy::kThreads, 0, stream>>>(partials, share.blocks, carry_in, carry_out);
  GPUSCAN_CHECK_LAUNCH();
  RtsDownsweepKernel<T, Op, Policy, kAlgo>
      <<<share.blocks, Policy::kThreads, 0, stream>>>(in, out, n, share, partials, exclusive);
  GPUSCAN_CHECK_LAUNCH();
  return cudaSuccess;
}

template <class T, class Op>
cudaError_t ScanImpl(ScanAlgorithm algo, void* d_temp, std::size_t& temp_bytes, const T* in, T* out,
                     uint64_t n, bool exclusive, const T* carry_in, T* carry_out, cudaStream_t stream) {
  using P = ScanTuningFor<kTunedArch, sizeof(T),
                          std::is_same_v<Op, ops::Min<T>> || std::is_same_v<Op, ops::Max<T>>>;
  using B = BulkScanTuning<kTunedArch, sizeof(T)>;
  using R = RtsTuning<kTunedArch, sizeof(T)>;
  switch (algo) {
    case ScanAlgorithm::kDecoupledLookback:
      return LookBackScan<T, Op, B>(d_temp, temp_bytes, in, out, n, exclusive, carry_in, carry_out, stream);
    case ScanAlgorithm::kChained:
      return SinglePassScan<T, Op, P, true>(d_temp, temp_bytes, in, out, n, exclusive, carry_in, carry_out, stream);
    case ScanAlgorithm::kReduceThenScan:
      return RtsScan<T, Op, R, BlockScanAlgo::kWarpShuffle>(d_temp, temp_bytes, in, out, n, exclusive, carry_in, carry_out, stream);
    case ScanAlgorithm::kKoggeStone:
      return RtsScan<T, Op, R, BlockScanAlgo::kKoggeStone>(d_temp, temp_bytes, in, out, n, exclusive, carry_in, carry_out, stream);
    case ScanAlgorithm::kBrentKung:
      return RtsScan<T, Op, R, BlockScanAlgo::kBrentKung>(d_temp, temp_bytes, in, out, n, exclusive, carry_in, carry_out, stream);
    case ScanAlgorithm::kBlelloch:
      return RtsScan<T, Op, R, BlockScanAlgo::kBlelloch>(d_temp, temp_bytes, in, out, n, exclusive, carry_in, carry_out, stream);
    case ScanAlgorithm::kHillisSteele:
      return RtsScan<T, Op, R, BlockScanAlgo::kHillisSteele>(d_temp, temp_bytes, in, out, n, exclusive, carry_in, carry_out, stream);
    case ScanAlgorithm::kCub:
      return CubScan<T, Op>(d_temp, temp_bytes, in, out, n, exclusive, carry_in, carry_out, stream);
  }
  return cudaErrorInvalidValue;
}

// ---------------------------------------------------------------------------------------------
// Reduce (one pass, last block combines).
template <class T, class Op, class Policy>
cudaError_t OwnReduce(void* d_temp, std::size_t& temp_bytes, const T* in, uint64_t n,
                      const T* carry_in, T* out, cudaStream_t stream) {
  const EvenShare share = MakeReduceShare<Policy>(DivUp(n, Policy::kTile));
  const std::size_t body = std::size_t(share.blocks) * sizeof(T);
  TempView view;
  cudaError_t rc;
  if (StartCall<T, Op>(d_temp, temp_bytes, body, out != nullptr && (n == 0 || in != nullptr), n, carry_in, out, stream,
                       view, rc)) {
    return rc;
  }
  ReduceKernel<T, Op, Policy><<<share.blocks, Policy::kThreads, 0, stream>>>(
      in, n, share, reinterpret_cast<T*>(view.body), view.header, carry_in, out);
  GPUSCAN_CHECK_LAUNCH();
  return cudaSuccess;
}

// ---------------------------------------------------------------------------------------------
// Compaction (one pass, look-back over kept counts). A call without indices on 4-byte values
// runs the slim-gather kernel under `Policy`; every other call the 8-byte gather under
// `IndexPolicy`. `view` holds at least SinglePassBody<Policy>(n).
template <class Policy, bool kSlim, class T>
cudaError_t LaunchCompact(const TempView& view, const T* in, const uint8_t* flags, Predicate<T> pred, uint64_t n,
                          int64_t index_base, T* out_values, int64_t* out_indices, uint64_t* num_kept,
                          cudaStream_t stream, LookBackDelays delays) {
  auto* tiles = reinterpret_cast<TileWord*>(view.body);
  const uint64_t launch_items = uint64_t(SinglePassBody<Policy>(n) / sizeof(TileWord)) * Policy::kTile;
  using Count = unsigned long long;
  const Count* cin = nullptr;
  int k = 0;
  for (uint64_t off = 0; off < n; off += launch_items, ++k) {
    const uint64_t m = std::min(launch_items, n - off);
    Count* cout = off + m == n ? reinterpret_cast<Count*>(num_kept) : &view.header->slot[k & 1];
    const auto t = static_cast<uint32_t>(DivUp(m, Policy::kTile));
    CompactKernel<T, Policy, kSlim><<<t, Policy::kThreads, 0, stream>>>(
        in == nullptr ? nullptr : in + off, flags == nullptr ? nullptr : flags + off, pred, m, t,
        index_base + static_cast<int64_t>(off), out_values, out_indices, cin, cout, view.header, tiles, delays);
    GPUSCAN_CHECK_LAUNCH();
    cin = cout;
  }
  return cudaSuccess;
}

template <class T, class Policy, class IndexPolicy = Policy>
cudaError_t OwnCompact(void* d_temp, std::size_t& temp_bytes, const T* in, const uint8_t* flags,
                       Predicate<T> pred, uint64_t n, int64_t index_base, T* out_values,
                       int64_t* out_indices, uint64_t* num_kept, cudaStream_t stream) {
  // Temp storage for either kernel.
  const std::size_t body = std::max(SinglePassBody<Policy>(n), SinglePassBody<IndexPolicy>(n));
  if (d_temp == nullptr) {
    temp_bytes = TempBytesFor(body);
    return cudaSuccess;
  }
  if (num_kept == nullptr) return cudaErrorInvalidValue;
  if (n > 0 && ((flags == nullptr || out_values != nullptr) && in == nullptr)) return cudaErrorInvalidValue;
  if (n == 0) return cudaMemsetAsync(num_kept, 0, sizeof(uint64_t), stream);
  TempView view;
  GPUSCAN_TRY(ViewTemp(d_temp, temp_bytes, body, view));
  double peak_gbs = 0;
  GPUSCAN_TRY(PeakDramGBs(peak_gbs));
  if constexpr (sizeof(T) < sizeof(unsigned long long)) {  // a slim gather is smaller only here
    if (out_indices == nullptr) {
      return LaunchCompact<Policy, true>(view, in, flags, pred, n, index_base, out_values, out_indices, num_kept,
                                         stream, CompactDelays<Policy>(peak_gbs));
    }
  }
  return LaunchCompact<IndexPolicy, false>(view, in, flags, pred, n, index_base, out_values, out_indices,
                                           num_kept, stream, CompactDelays<IndexPolicy>(peak_gbs));
}

}  // namespace gpuscan::kernels::detail

// The public templates' definitions; each .cu file explicitly instantiates its share.
namespace gpuscan::kernels {

template <class T, class Op>
cudaError_t Scan(ScanAlgorithm algo, void* d_temp, std::size_t& temp_bytes, const T* d_in, T* d_out,
                 uint64_t n, bool exclusive, const T* d_carry_in, T* d_carry_out,
                 cudaStream_t stream) {
  return detail::ScanImpl<T, Op>(algo, d_temp, temp_bytes, d_in, d_out, n, exclusive, d_carry_in,
                                 d_carry_out, stream);
}

template <class T, class Op>
cudaError_t Reduce(bool use_cub, void* d_temp, std::size_t& temp_bytes, const T* d_in, uint64_t n,
                   const T* d_carry_in, T* d_out, cudaStream_t stream) {
  if (use_cub) return detail::CubReduce<T, Op>(d_temp, temp_bytes, d_in, n, d_carry_in, d_out, stream);
  return detail::OwnReduce<T, Op, detail::ReduceTuning<detail::kTunedArch, sizeof(T)>>(
      d_temp, temp_bytes, d_in, n, d_carry_in, d_out, stream);
}

template <class T>
cudaError_t Compact(bool use_cub, void* d_temp, std::size_t& temp_bytes, const T* d_in,
                    const uint8_t* d_flags, Predicate<T> pred, uint64_t n, int64_t index_base,
                    T* d_out_values, int64_t* d_out_indices, uint64_t* d_num_kept,
                    cudaStream_t stream) {
  if (use_cub) {
    return detail::CubCompact<T>(d_temp, temp_bytes, d_in, d_flags, pred, n, index_base,
                                 d_out_values, d_out_indices, d_num_kept, stream);
  }
  return detail::OwnCompact<T, detail::CompactTuning<detail::kTunedArch, sizeof(T)>,
                            detail::CompactIndexTuning<detail::kTunedArch, sizeof(T)>>(
      d_temp, temp_bytes, d_in, d_flags, pred, n, index_base, d_out_values, d_out_indices,
      d_num_kept, stream);
}

}  // namespace gpuscan::kernels

// Explicit instantiations, one (T, Op) at a time.
#define GPUSCAN_INSTANTIATE_SCAN(T, OP)                                                          \
  template cudaError_t gpuscan::kernels::Scan<T, gpuscan::ops::OP<T>>(                           \
      gpuscan::kernels::ScanAlgorithm, void*, std::size_t&, const T*, T*, uint64_t, bool,        \
      const T*, T*, cudaStream_t);

#define GPUSCAN_INSTANTIATE_REDUCE(T, OP)                                                        \
  template cudaError_t gpuscan::kernels::Reduce<T, gpuscan::ops::OP<T>>(                         \
      bool, void*, std::size_t&, const T*, uint64_t, const T*, T*, cudaStream_t);

#define GPUSCAN_INSTANTIATE_COMPACT(T)                                                           \
  template cudaError_t gpuscan::kernels::Compact<T>(                                             \
      bool, void*, std::size_t&, const T*, const uint8_t*, gpuscan::kernels::Predicate<T>,       \
      uint64_t, int64_t, T*, int64_t*, uint64_t*, cudaStream_t);

