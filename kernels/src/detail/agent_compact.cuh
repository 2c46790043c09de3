// Single-pass stable compaction: a block decides which of its tile's elements stay, scans the
// kept counts, learns how many were kept before its tile through the same decoupled look-back
// as the scan (over uint64 counts), gathers its kept elements in shared memory and writes them
// out contiguously (coalesced), values and indices in turn.
#pragma once

#include "gpuscan/kernels/compact.h"
#include "block_scan.cuh"
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

// count_in / count_out: kept before this launch's first element (nullptr = 0) and after its
// last, for calls split into several launches; index_base already includes the segment start.
template <class T, class Policy>
__global__ void __launch_bounds__(Policy::kThreads)
    CompactKernel(const T* in, const uint8_t* flags, Predicate<T> pred, uint64_t n, uint32_t num_tiles,
                  int64_t index_base, T* out_values, int64_t* out_indices,
                  const unsigned long long* count_in, unsigned long long* count_out,
                  TempHeader* header, TileWord* tiles) {
  constexpr int kThreads = Policy::kThreads, kItems = Policy::kItems, kTile = Policy::kTile;
  using Count = unsigned long long;
  using CountOp = ops::Sum<Count>;
  using Scan = BlockScan<unsigned, ops::Sum<unsigned>, kThreads, BlockScanAlgo::kWarpShuffle>;
  __shared__ typename Scan::Storage scan_storage;
  __shared__ uint32_t s_tile;
  __shared__ unsigned long long s_epoch;
  __shared__ Count s_prefix;
  __shared__ unsigned long long s_gather[kTile];  // kept values, then kept indices

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
  const int valid = ThreadValid(tile_valid, kItems);
  const uint64_t first = base + uint64_t(threadIdx.x) * kItems;
  const bool full = tile_valid == kTile;

  // Which items stay: a bit mask per thread.
  const bool need_values = out_values != nullptr || flags == nullptr;
  T items[kItems];
  if (need_values) LoadItems<T, kItems>(in + first, valid, full && Aligned16(in), T(0), items);
  unsigned keep = 0;
  if (flags != nullptr) {
    uint8_t f[kItems];
    if (full && kItems % 16 == 0 && Aligned16(flags)) {
      const uint4* p = reinterpret_cast<const uint4*>(flags + first);
#pragma unroll
      for (int v = 0; v < kItems / 16; ++v) {
        const uint4 w = p[v];
        memcpy(&f[v * 16], &w, 16);
      }
    } else if (full && kItems % 8 == 0 && (reinterpret_cast<std::uintptr_t>(flags) & 7u) == 0) {
      const uint2* p = reinterpret_cast<const uint2*>(flags + first);
#pragma unroll
      for (int v = 0; v < kItems / 8; ++v) {
        const uint2 w = p[v];
        memcpy(&f[v * 8], &w, 8);
      }
    } else {
#pragma unroll
      for (int i = 0; i < kItems; ++i) f[i] = i < valid ? flags[first + i] : 0;
    }
#pragma unroll
    for (int i = 0; i < kItems; ++i) keep |= (f[i] != 0 && i < valid) ? (1u << i) : 0u;
  } else {
#pragma unroll
    for (int i = 0; i < kItems; ++i) keep |= (i < valid && Keep(pred, items[i])) ? (1u << i) : 0u;
  }

  unsigned thread_excl, tile_kept;
  Scan::ExclusiveScan(static_cast<unsigned>(__popc(keep)), thread_excl, tile_kept, scan_storage);

  if (threadIdx.x < kWarpThreads) {
    Count prefix;
    if (tile == 0) {
      prefix = count_in != nullptr ? *count_in : 0ull;
      if (threadIdx.x == 0) PublishTile<Count>(tiles, 0, epoch, kFlagInclusive, prefix + tile_kept);
    } else {
      if (threadIdx.x == 0) PublishTile<Count>(tiles, tile, epoch, kFlagPartial, Count(tile_kept));
      prefix = LookBack<Count, CountOp>(tiles, tile, epoch);
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
    unsigned r = thread_excl;
#pragma unroll
    for (int i = 0; i < kItems; ++i) {
      if (keep & (1u << i)) gather[r++] = items[i];
    }
    __syncthreads();
    for (unsigned j = threadIdx.x; j < tile_kept; j += kThreads) out_values[prefix + j] = gather[j];
    __syncthreads();
  }
  if (out_indices != nullptr) {
    long long* gather = reinterpret_cast<long long*>(s_gather);
    unsigned r = thread_excl;
#pragma unroll
    for (int i = 0; i < kItems; ++i) {
      if (keep & (1u << i)) gather[r++] = index_base + static_cast<long long>(first + i);
    }
    __syncthreads();
    for (unsigned j = threadIdx.x; j < tile_kept; j += kThreads) out_indices[prefix + j] = gather[j];
  }
}

}  // namespace gpuscan::kernels::detail
