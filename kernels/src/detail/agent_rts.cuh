// Reduce-then-scan, three launches around a pluggable block scan:
//   1. RtsReduceKernel: each block combines its even share of tiles into partials[b].
//   2. RtsScanPartialsKernel: one block turns partials into exclusive prefixes (carry first)
//      and writes the carry out.
//   3. RtsDownsweepKernel: each block scans its tiles in order, starting from its prefix, with
//      BlockScan<kAlgo> as the block-level scan, and zeroes its partial slot again.
#pragma once

#include "agent_reduce.cuh"

namespace gpuscan::kernels::detail {

template <class T, class Op, class Policy>
__global__ void __launch_bounds__(Policy::kThreads)
    RtsReduceKernel(const T* in, uint64_t n, EvenShare share, T* partials) {
  using Reduce = BlockReduce<T, Op, Policy::kThreads>;
  __shared__ typename Reduce::Storage storage;
  const T total = Reduce::Reduce(ThreadReduceShare<T, Op, Policy>(in, n, share), storage);
  if (threadIdx.x == 0) partials[blockIdx.x] = total;
}

template <class T, class Op, int kThreads, BlockScanAlgo kAlgo>
__global__ void __launch_bounds__(kThreads)
    RtsScanPartialsKernel(T* partials, uint32_t count, const T* carry_in, T* carry_out) {
  using Scan = BlockScan<T, Op, kThreads, kAlgo>;
  __shared__ typename Scan::Storage storage;
  const Op op;
  T running = carry_in != nullptr ? *carry_in : Op::identity();
  for (uint32_t b0 = 0; b0 < count; b0 += kThreads) {
    const uint32_t i = b0 + threadIdx.x;
    const T x = i < count ? partials[i] : Op::identity();
    T excl, total;
    Scan::ExclusiveScan(x, excl, total, storage);
    if (i < count) partials[i] = op(running, excl);
    running = op(running, total);
    __syncthreads();
  }
  if (threadIdx.x == 0 && carry_out != nullptr) *carry_out = running;
}

template <class T, class Op, class Policy, BlockScanAlgo kAlgo>
__global__ void __launch_bounds__(Policy::kThreads)
    RtsDownsweepKernel(const T* in, T* out, uint64_t n, EvenShare share, T* partials, bool exclusive) {
  constexpr int kThreads = Policy::kThreads, kItems = Policy::kItems, kTile = Policy::kTile;
  using Scan = BlockScan<T, Op, kThreads, kAlgo>;
  __shared__ typename Scan::Storage storage;
  __shared__ T s_prefix;
  const Op op;
  if (threadIdx.x == 0) {
    s_prefix = partials[blockIdx.x];
    partials[blockIdx.x] = T(0);  // back to zero for the next call (temp_storage.h)
  }
  __syncthreads();
  T running = s_prefix;
  const uint64_t t0 = uint64_t(blockIdx.x) * share.per_block;
  const uint64_t t1 = t0 + share.per_block < share.num_tiles ? t0 + share.per_block : share.num_tiles;
  const bool aligned = Aligned16(in) && Aligned16(out);
  for (uint64_t t = t0; t < t1; ++t) {
    const uint64_t base = t * kTile;
    const int tile_valid = n - base >= uint64_t(kTile) ? kTile : int(n - base);
    const int valid = ThreadValid(tile_valid, kItems);
    const bool vec = aligned && tile_valid == kTile;
    const uint64_t first = base + uint64_t(threadIdx.x) * kItems;
    T items[kItems];
    LoadItems<T, kItems>(in + first, valid, vec, Op::identity(), items);
    T sum = items[0];
#pragma unroll
    for (int i = 1; i < kItems; ++i) sum = op(sum, items[i]);
    T thread_excl, tile_total;
    Scan::ExclusiveScan(sum, thread_excl, tile_total, storage);
    T run = op(running, thread_excl);
    if (exclusive) {
#pragma unroll
      for (int i = 0; i < kItems; ++i) {
        const T x = items[i];
        items[i] = run;
        run = op(run, x);
      }
    } else {
#pragma unroll
      for (int i = 0; i < kItems; ++i) {
        run = op(run, items[i]);
        items[i] = run;
      }
    }
    StoreItems<T, kItems>(out + first, valid, vec, items);
    running = op(running, tile_total);
    __syncthreads();  // storage is reused by the next tile
  }
}

}  // namespace gpuscan::kernels::detail
