// Single-pass stable compaction: a block loads its tile in the striped layout (striped.cuh:
// every warp instruction reads 512 contiguous bytes of values, 128 of 1-byte flags for 4-byte
// values), decides which elements stay, ranks them in index order (per row of the layout, warp
// ballots of the kept counts; then rows, then warps), learns how many were kept before its tile
// through the same decoupled look-back as the scan (over uint64 counts, with the policy's
// delays), gathers its kept elements in shared memory and writes them out contiguously
// (coalesced), values and indices in turn.
//
// kSlimGather: the gather buffer holds T (a call that asks for no indices) instead of 8-byte
// words (room for an index): half a 4-byte tile's shared memory, which is what lets 4-byte
// values take long tiles (tuning.cuh, CompactTuning).
#pragma once

#include "gpuscan/kernels/compact.h"
#include "block_scan.cuh"
#include "striped.cuh"
#include "tile_state.cuh"

namespace gpuscan::kernels::detail {

template <class T>
__device__ __forceinline__ bool Keep(const Predicate<T>& p, T x) {
  switch (p.op) {
    case PredicateOp::kNonzero: return x != T(0);
    case PredicateOp::kEq: return x == p.threshold;
    case PredicateOp::kNe: return x != p.threshold;
    case PredicateOp::kLt: return x < p.threshold;
    case PredicateOp::kLe: return x <= p.threshold;
    case PredicateOp::kGt: return x > p.threshold;
    case PredicateOp::kGe: return x >= p.threshold;
    case PredicateOp::kInRange: return p.threshold <= x && x < p.upper;
    case PredicateOp::kNotNan: return !ops::IsNan(x);
  }
  return false;
}

// The keep mask of a thread's items (bit i = item i) under `p`. The operator is the launch's, so it
// is switched on once here and each case runs its own unrolled loop: with the switch inside the
// loop (Keep per item) the predicate form ran at half the flags form's speed (2^28 int32 GT 0 on
// the H200: 1150 us against 571, 2026-11-28).
template <class Layout, class Mask, class T, int kItems>
__device__ __forceinline__ Mask PredicateMask(const Predicate<T>& p, const T (&items)[kItems], int first,
                                              int tile_valid) {
  auto mask = [&](auto keep_one) {
    Mask m = 0;
    Layout::ForEachItem([&](int i, int off) {
      m |= (first + off < tile_valid && keep_one(items[i])) ? (Mask{1} << i) : Mask{0};
    });
    return m;
  };
  const T t = p.threshold, u = p.upper;
  switch (p.op) {
    case PredicateOp::kNonzero: return mask([](T x) { return x != T(0); });
    case PredicateOp::kEq: return mask([t](T x) { return x == t; });
    case PredicateOp::kNe: return mask([t](T x) { return x != t; });
    case PredicateOp::kLt: return mask([t](T x) { return x < t; });
    case PredicateOp::kLe: return mask([t](T x) { return x <= t; });
    case PredicateOp::kGt: return mask([t](T x) { return x > t; });
    case PredicateOp::kGe: return mask([t](T x) { return x >= t; });
    case PredicateOp::kInRange: return mask([t, u](T x) { return t <= x && x < u; });
    case PredicateOp::kNotNan: return mask([](T x) { return !ops::IsNan(x); });
  }
  return 0;
}

// count_in / count_out: kept before this launch's first element (nullptr = 0) and after its
// last, for calls split into several launches; index_base already includes the segment start.
// delays: the look-back's sleeps, chosen per device at launch (tuning.cuh CompactDelays).
template <class T, class Policy, bool kSlimGather>
__global__ void __launch_bounds__(Policy::kThreads)
    CompactKernel(const T* in, const uint8_t* flags, Predicate<T> pred, uint64_t n, uint32_t num_tiles,
                  int64_t index_base, T* out_values, int64_t* out_indices,
                  const unsigned long long* count_in, unsigned long long* count_out,
                  TempHeader* header, TileWord* tiles, LookBackDelays delays) {
  constexpr int kThreads = Policy::kThreads, kItems = Policy::kItems, kTile = Policy::kTile;
  constexpr int kWarps = kThreads / kWarpThreads;
  using Layout = StripedLayout<T, kItems>;
  constexpr int kVecs = Layout::kVecs, kVecElems = Layout::kVecElems, kRowStride = Layout::kRowStride;
  // Bits of a row's kept count (0..kVecElems), each counted across the warp by one ballot.
  constexpr int kCountBits = kVecElems >= 8 ? 4 : (kVecElems >= 4 ? 3 : 2);
  static_assert(kItems <= 64, "the keep mask has 64 bits");
  using Mask = std::conditional_t<(kItems > 32), unsigned long long, unsigned>;
  static_assert(Policy::kStriped, "compaction is striped only");
  using Count = unsigned long long;
  using CountOp = ops::Sum<Count>;
  using FlagWord = std::conditional_t<kVecElems == 4, uint32_t, std::conditional_t<kVecElems == 2, uint16_t, uint64_t>>;
  __shared__ unsigned s_warp_kept[kWarps];
  __shared__ uint32_t s_tile;
  __shared__ unsigned long long s_epoch;
  __shared__ Count s_prefix;
  using Gather = std::conditional_t<kSlimGather, T, unsigned long long>;
  __shared__ Gather s_gather[kTile];  // kept values, then kept indices
  const int lane = LaneId(), warp = WarpId();

  if (threadIdx.x == 0) {
    uint32_t t;
    unsigned long long e;
    DrawTicket(header, num_tiles, t, e);
    s_tile = t;
    s_epoch = e;
  }
  __syncthreads();
  const uint32_t tile = s_tile;
  const unsigned long long epoch = s_epoch;
  const uint64_t base = static_cast<uint64_t>(tile) * kTile;
  const int tile_valid = n - base >= uint64_t(kTile) ? kTile : int(n - base);
  const bool full = tile_valid == kTile;
  const int first = Layout::First();  // tile offset of my item 0; item v * kVecElems + j is at
                                      // first + v * kRowStride + j

  // Which items stay: a bit mask per thread (bit i = item i).
  const bool need_values = out_values != nullptr || flags == nullptr;
  T items[kItems];
  if (need_values) Layout::Load(in + base, tile_valid, full && Aligned16(in), T(0), items);
  Mask keep = 0;
  if (flags != nullptr) {
    const uint8_t* f = flags + base + first;
    if (full && (reinterpret_cast<std::uintptr_t>(flags) & (sizeof(FlagWord) - 1)) == 0) {
#pragma unroll
      for (int v = 0; v < kVecs; ++v) {
        const FlagWord w = *reinterpret_cast<const FlagWord*>(f + v * kRowStride);
#pragma unroll
        for (int j = 0; j < kVecElems; ++j) {
          keep |= ((w >> (8 * j)) & 0xffu) != 0 ? (Mask{1} << (v * kVecElems + j)) : Mask{0};
        }
      }
    } else {
      Layout::ForEachItem([&](int i, int off) {
        const int idx = first + off;
        keep |= (idx < tile_valid && f[off] != 0) ? (Mask{1} << i) : Mask{0};
      });
    }
  } else {
    keep = PredicateMask<Layout, Mask>(pred, items, first, full ? kTile : tile_valid);
  }

  // Ranks in the warp, index order (row by row; in a row lane by lane): row_rank[v] = kept
  // elements of this warp before my row-v vector.
  unsigned row_rank[kVecs];
  unsigned warp_kept = 0;
  const unsigned lanes_before = (1u << lane) - 1u;
#pragma unroll
  for (int v = 0; v < kVecs; ++v) {
    const unsigned c = __popc(unsigned(keep >> (v * kVecElems)) & ((1u << kVecElems) - 1u));
    unsigned before = 0, total = 0;
#pragma unroll
    for (int b = 0; b < kCountBits; ++b) {
      const unsigned m = __ballot_sync(kFullMask, (c >> b) & 1u);
      before += unsigned(__popc(m & lanes_before)) << b;
      total += unsigned(__popc(m)) << b;
    }
    row_rank[v] = warp_kept + before;
    warp_kept += total;
  }
  if (lane == 0) s_warp_kept[warp] = warp_kept;
  __syncthreads();
  unsigned warp_before = 0, tile_kept = 0;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) {
    const unsigned k = s_warp_kept[w];
    if (w < warp) warp_before += k;
    tile_kept += k;
  }

  if (threadIdx.x < kWarpThreads) {
    Count prefix;
    if (tile == 0) {
      prefix = count_in != nullptr ? *count_in : 0ull;
      if (threadIdx.x == 0) PublishTile<Count>(tiles, 0, epoch, kFlagInclusive, prefix + tile_kept);
    } else {
      if (threadIdx.x == 0) PublishTile<Count>(tiles, tile, epoch, kFlagPartial, Count(tile_kept));
      prefix = LookBackWith<Count, CountOp>(tiles, tile, epoch, num_tiles >= Policy::kDelayMinTiles, delays);
      if (threadIdx.x == 0) PublishTile<Count>(tiles, tile, epoch, kFlagInclusive, prefix + tile_kept);
    }
    if (threadIdx.x == 0) {
      s_prefix = prefix;
      if (tile == num_tiles - 1) *count_out = prefix + tile_kept;
    }
  }
  __syncthreads();
  const Count prefix = s_prefix;

  if (out_values != nullptr) {
    T* gather = reinterpret_cast<T*>(s_gather);
#pragma unroll
    for (int v = 0; v < kVecs; ++v) {
      unsigned r = warp_before + row_rank[v];
#pragma unroll
      for (int j = 0; j < kVecElems; ++j) {
        if ((keep >> (v * kVecElems + j)) & 1u) gather[r++] = items[v * kVecElems + j];
      }
    }
    __syncthreads();
    for (unsigned j = threadIdx.x; j < tile_kept; j += kThreads) out_values[prefix + j] = gather[j];
    __syncthreads();
  }
  if constexpr (!kSlimGather) {
    if (out_indices == nullptr) return;
    long long* gather = reinterpret_cast<long long*>(s_gather);
    const long long tile_index = index_base + static_cast<long long>(base) + first;
#pragma unroll
    for (int v = 0; v < kVecs; ++v) {
      unsigned r = warp_before + row_rank[v];
#pragma unroll
      for (int j = 0; j < kVecElems; ++j) {
        if ((keep >> (v * kVecElems + j)) & 1u) gather[r++] = tile_index + v * kRowStride + j;
      }
    }
    __syncthreads();
    for (unsigned j = threadIdx.x; j < tile_kept; j += kThreads) out_indices[prefix + j] = gather[j];
  }
}

}  // namespace gpuscan::kernels::detail
