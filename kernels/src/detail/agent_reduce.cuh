// Reduction agents: a block combines its share of whole tiles in a fixed order. Reduce reads
// its tiles in the striped layout (ThreadReduceStriped) with the last block to finish combining
// the per-block partials; phase one of the reduce-then-scan family reads an even share in the
// blocked layout its downsweep uses (ThreadReduceShare).
#pragma once

#include "block_scan.cuh"
#include "striped.cuh"

namespace gpuscan::kernels::detail {

// Even share: block b of `blocks` walks tiles [b * per_block, min((b + 1) * per_block, num_tiles)).
struct EvenShare {
  uint64_t num_tiles;
  uint64_t per_block;
  uint32_t blocks;
};

inline EvenShare MakeEvenShare(uint64_t num_tiles, uint32_t max_blocks) {
  EvenShare s{num_tiles, 1, 1};
  if (num_tiles == 0) return s;
  const uint64_t b = num_tiles < max_blocks ? num_tiles : max_blocks;
  s.per_block = DivUp(num_tiles, b);
  s.blocks = static_cast<uint32_t>(DivUp(num_tiles, s.per_block));
  return s;
}

// This thread's combination of its items over the block's tiles (identity if none). Only the
// tile loop order and item order matter, so the result is deterministic for a given share.
template <class T, class Op, class Policy>
__device__ __forceinline__ T ThreadReduceShare(const T* in, uint64_t n, const EvenShare& share) {
  constexpr int kItems = Policy::kItems, kTile = Policy::kTile;
  const Op op;
  const uint64_t t0 = uint64_t(blockIdx.x) * share.per_block;
  const uint64_t t1 = t0 + share.per_block < share.num_tiles ? t0 + share.per_block : share.num_tiles;
  const bool aligned = Aligned16(in);
  T acc = Op::identity();
  for (uint64_t t = t0; t < t1; ++t) {
    const uint64_t base = t * kTile;
    const int tile_valid = n - base >= uint64_t(kTile) ? kTile : int(n - base);
    const int valid = ThreadValid(tile_valid, kItems);
    T items[kItems];
    LoadItems<T, kItems>(in + base + uint64_t(threadIdx.x) * kItems, valid,
                         aligned && tile_valid == kTile, Op::identity(), items);
#pragma unroll
    for (int i = 0; i < kItems; ++i) acc = op(acc, items[i]);
  }
  return acc;
}

// Reduce's tile assignment for a policy: blocks = min(tiles, kMaxBlocks); an even share of
// consecutive tiles per block, or (kGridStride) tiles b, b + blocks, ...
template <class Policy>
inline EvenShare MakeReduceShare(uint64_t num_tiles) {
  if (!Policy::kGridStride) return MakeEvenShare(num_tiles, Policy::kMaxBlocks);
  EvenShare s{num_tiles, 1, 1};
  if (num_tiles == 0) return s;
  s.blocks = static_cast<uint32_t>(num_tiles < uint64_t(Policy::kMaxBlocks) ? num_tiles : Policy::kMaxBlocks);
  return s;
}

// This thread's combination of its striped items over the block's tiles, kUnroll tiles' loads
// in flight before they are combined (in tile order, then item order: the association depends
// on the share alone, not on the unrolling or the address's alignment).
template <class T, class Op, class Policy>
__device__ __forceinline__ T ThreadReduceStriped(const T* in, uint64_t n, const EvenShare& share) {
  constexpr int kItems = Policy::kItems, kTile = Policy::kTile, kUnroll = Policy::kUnroll;
  using Layout = StripedLayout<T, kItems>;
  const Op op;
  const bool aligned = Aligned16(in);
  uint64_t t, t_end, step;
  if constexpr (Policy::kGridStride) {
    t = blockIdx.x;
    t_end = share.num_tiles;
    step = share.blocks;
  } else {
    t = uint64_t(blockIdx.x) * share.per_block;
    t_end = t + share.per_block < share.num_tiles ? t + share.per_block : share.num_tiles;
    step = 1;
  }
  T acc = Op::identity();
  for (; t < t_end; t += step * kUnroll) {
    T items[kUnroll][kItems];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const uint64_t tt = t + u * step;
      if (u == 0 || tt < t_end) {
        const uint64_t base = tt * kTile;
        const int tile_valid = n - base >= uint64_t(kTile) ? kTile : int(n - base);
        Layout::template Load<Policy::kHint>(in + base, tile_valid, aligned && tile_valid == kTile,
                                             Op::identity(), items[u]);
      } else {
#pragma unroll
        for (int i = 0; i < kItems; ++i) items[u][i] = Op::identity();
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
#pragma unroll
      for (int i = 0; i < kItems; ++i) acc = op(acc, items[u][i]);
    }
  }
  return acc;
}

// One pass: every block writes its partial; the last block to finish (an atomic count of
// finished blocks) combines the partials in index order, writes *out = carry op total, and
// returns the count and the partials to zero for the next call.
template <class T, class Op, class Policy>
__global__ void __launch_bounds__(Policy::kThreads)
    ReduceKernel(const T* in, uint64_t n, EvenShare share, T* partials, TempHeader* header,
                 const T* carry_in, T* out) {
  constexpr int kThreads = Policy::kThreads;
  using Reduce = BlockReduce<T, Op, kThreads>;
  __shared__ typename Reduce::Storage storage;
  __shared__ bool s_last;
  const Op op;
  const T total = Reduce::Reduce(ThreadReduceStriped<T, Op, Policy>(in, n, share), storage);
  if (threadIdx.x == 0) {
    partials[blockIdx.x] = total;
    __threadfence();  // the partial is visible before the count says so
    const unsigned prev = atomicAdd(&header->done, 1u);
    s_last = prev == gridDim.x - 1;
  }
  __syncthreads();
  if (!s_last) return;
  __threadfence();
  // Thread t combines partials t, t + kThreads, ... then the block combines the threads in
  // order: a fixed association for a given block count.
  T acc = Op::identity();
  for (uint32_t i = threadIdx.x; i < gridDim.x; i += kThreads) acc = op(acc, __ldcg(partials + i));
  __syncthreads();  // storage is reused
  const T all = Reduce::Reduce(acc, storage);
  __syncthreads();  // every partial read before any is zeroed
  for (uint32_t i = threadIdx.x; i < gridDim.x; i += kThreads) partials[i] = T(0);
  if (threadIdx.x == 0) {
    const T carry = carry_in != nullptr ? *carry_in : Op::identity();
    *out = op(carry, all);
    header->done = 0;
  }
}

}  // namespace gpuscan::kernels::detail
