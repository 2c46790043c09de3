// Single-pass scan with the tile in shared memory, moved by bulk copies (sm_90 TMA).
//
// The register kernel (agent_single_pass.cuh) holds its tile's 32 items a thread in registers
// through the look-back: 66-70 registers, 7 blocks a SM, and a block that sleeps in the
// look-back keeps its registers from a block that could be loading. Here one thread asks the
// copy engine for the whole tile (cp.async.bulk into shared memory, completion on an mbarrier)
// as soon as it has drawn the ticket; the threads fold their striped vectors out of shared
// memory into the rows' exclusive prefixes only; the look-back runs with the tile parked in
// shared memory; then the threads scan their vectors in place and one thread hands the tile back
// with a bulk store. A block needs ~40 registers and kTile * sizeof(T) bytes of shared memory,
// so ~12 blocks of 16 KiB tiles fit a SM.
//
// Before the ticket, thread 0 asks L2 for tile blockIdx.x (PrefetchLikelyTile, tile_state.cuh):
// the ticket's atomic is a round trip to L2 before the tile's address is known.
//
// Partial or unaligned tiles (and builds for GPUs before sm_90) move element by element through
// the same shared tile, so the association, and the bits, are the same as a full tile's.
// Launched by LaunchSinglePass (agent_single_pass.cuh) for the look-back scan of arrays.
#pragma once

#include <cuda/ptx>

#include "striped.cuh"
#include "tile_state.cuh"

namespace gpuscan::kernels::detail {

template <class T, class Op, class Policy>
__global__ void __launch_bounds__(Policy::kThreads, Policy::kMinBlocks)
    SinglePassScanBulkKernel(const T* in, T* out, uint64_t n, uint32_t num_tiles, bool exclusive, const T* carry_in,
                             T* carry_out, TempHeader* header, TileWord* tiles) {
  constexpr int kThreads = Policy::kThreads, kItems = Policy::kItems, kTile = Policy::kTile;
  constexpr int kWarps = kThreads / kWarpThreads;
  using Layout = StripedLayout<T, kItems>;
  constexpr int kVecs = Layout::kVecs, kVecElems = Layout::kVecElems;
  constexpr uint32_t kTileBytes = uint32_t(kTile) * sizeof(T);
  __shared__ alignas(128) T s_items[kTile];
  __shared__ alignas(8) uint64_t s_full;  // mbarrier: the bulk load has landed
  __shared__ T s_warp_total[kWarps];
  __shared__ uint32_t s_tile;
  __shared__ unsigned long long s_epoch;
  __shared__ bool s_bulk;
  __shared__ T s_prefix;
  const Op op;

  if (threadIdx.x == 0) {
    uint32_t t;
    unsigned long long e;
    PrefetchLikelyTile<kTile>(num_tiles, n, [&](uint64_t g) { PrefetchL2(in + g, kTileBytes); });
    DrawTicket(header, num_tiles, t, e);
    const uint64_t b = static_cast<uint64_t>(t) * kTile;
#if __CUDA_ARCH__ >= 900
    const bool bulk = n - b >= uint64_t(kTile) && Aligned16(in + b) && Aligned16(out + b);
#else
    constexpr bool bulk = false;
#endif
    if (bulk) {
#if __CUDA_ARCH__ >= 900
      cuda::ptx::mbarrier_init(&s_full, 1);
      cuda::ptx::fence_mbarrier_init(cuda::ptx::sem_release, cuda::ptx::scope_cluster);
      cuda::ptx::mbarrier_arrive_expect_tx(cuda::ptx::sem_release, cuda::ptx::scope_cta, cuda::ptx::space_shared,
                                           &s_full, kTileBytes);
      cuda::ptx::cp_async_bulk(cuda::ptx::space_shared, cuda::ptx::space_global, s_items, in + b, kTileBytes,
                               &s_full);
#endif
    }
    s_tile = t;
    s_epoch = e;
    s_bulk = bulk;
  }
  __syncthreads();
  const uint32_t tile = s_tile;
  const unsigned long long epoch = s_epoch;
  const bool bulk = s_bulk;
  const uint64_t base = static_cast<uint64_t>(tile) * kTile;
  const int tile_valid = n - base >= uint64_t(kTile) ? kTile : int(n - base);
  if (bulk) {
#if __CUDA_ARCH__ >= 900
    while (!cuda::ptx::mbarrier_try_wait_parity(&s_full, 0u)) {
    }
#endif
  } else {
    for (int i = threadIdx.x; i < kTile; i += kThreads) s_items[i] = i < tile_valid ? in[base + i] : Op::identity();
    __syncthreads();
  }

  // This thread's vector v: 16 bytes at tile offset First() + v * kRowStride.
  const int first = Layout::First();
  auto vec_at = [&](int v) -> uint4* { return reinterpret_cast<uint4*>(s_items + first + v * Layout::kRowStride); };
  auto unpack = [](uint4 u, T (&x)[kVecElems]) {
    ItemVec<T, kVecElems> w;
    w.vec[0] = u;
#pragma unroll
    for (int j = 0; j < kVecElems; ++j) x[j] = w.item[j];
  };

  T row_excl[kVecs];  // combination of the tile's elements before each of my vectors
  const T block_total = StripedRowPrefixes<T, Op>(
      [&](int v) {
        T x[kVecElems];
        unpack(*vec_at(v), x);
        T s = x[0];
#pragma unroll
        for (int j = 1; j < kVecElems; ++j) s = op(s, x[j]);
        return s;
      },
      row_excl, s_warp_total);

  if (threadIdx.x < kWarpThreads) {
    T prefix;
    if (tile == 0) {
      prefix = carry_in != nullptr ? *carry_in : Op::identity();
      if (threadIdx.x == 0) PublishTile(tiles, 0, epoch, kFlagInclusive, op(prefix, block_total));
    } else {
      if (threadIdx.x == 0) PublishTile(tiles, tile, epoch, kFlagPartial, block_total);
      prefix = LookBack<T, Op, Policy::kFirstDelayNs, Policy::kPollDelayNs>(tiles, tile, epoch,
                                                                            num_tiles >= Policy::kDelayMinTiles);
      if (threadIdx.x == 0) PublishTile(tiles, tile, epoch, kFlagInclusive, op(prefix, block_total));
    }
    if (threadIdx.x == 0) {
      s_prefix = prefix;
      if (carry_out != nullptr && tile == num_tiles - 1) *carry_out = op(prefix, block_total);
    }
  }
  __syncthreads();
  const T prefix = s_prefix;

#pragma unroll
  for (int v = 0; v < kVecs; ++v) {
    T x[kVecElems];
    unpack(*vec_at(v), x);
    T run = op(prefix, row_excl[v]);
    ItemVec<T, kVecElems> w;
#pragma unroll
    for (int j = 0; j < kVecElems; ++j) {
      if (exclusive) {
        w.item[j] = run;
        run = op(run, x[j]);
      } else {
        run = op(run, x[j]);
        w.item[j] = run;
      }
    }
    *vec_at(v) = w.vec[0];
  }
  if (bulk) {
#if __CUDA_ARCH__ >= 900
    // The copy engine reads shared memory through the async proxy: make the threads' writes
    // visible to it, then one thread stores the tile and waits until it has been read out.
    cuda::ptx::fence_proxy_async(cuda::ptx::space_shared);
    __syncthreads();
    if (threadIdx.x == 0) {
      cuda::ptx::cp_async_bulk(cuda::ptx::space_global, cuda::ptx::space_shared, out + base, s_items, kTileBytes);
      cuda::ptx::cp_async_bulk_commit_group();
      cuda::ptx::cp_async_bulk_wait_group_read(cuda::ptx::n32_t<0>{});
    }
#endif
  } else {
    __syncthreads();
    for (int i = threadIdx.x; i < tile_valid; i += kThreads) out[base + i] = s_items[i];
  }
}

}  // namespace gpuscan::kernels::detail
