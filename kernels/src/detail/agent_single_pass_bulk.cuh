// Single-pass scan with the tile in shared memory, moved by bulk copies (sm_90 TMA).
//
// The register kernel (agent_single_pass.cuh) holds its tile's 32 items a thread in registers
// through the look-back: 66-70 registers, 7 blocks a SM, and a block that sleeps in the
// look-back keeps its registers from a block that could be loading. Here one thread asks the
// copy engine for the whole tile (cp.async.bulk into shared memory, completion on an mbarrier)
// as soon as it has drawn the ticket; the threads fold their striped vectors out of shared
// memory into the rows' exclusive prefixes only; the look-back runs with the tile parked in
// shared memory; then the threads scan their vectors in place and one thread hands the tile back
// with a bulk store. A block needs ~40 registers and its tile's bytes of shared memory, so ~12
// blocks of 16 KiB tiles fit a SM.
//
// Before the ticket, thread 0 asks L2 for tile blockIdx.x (PrefetchLikelyTile, tile_state.cuh):
// the ticket's atomic is a round trip to L2 before the tile's address is known. Small launches
// take tile blockIdx.x itself and draw the ticket after the load has started.
//
// Partial or unaligned tiles (and builds for GPUs before sm_90) move element by element through
// the same shared tile, so the association, and the bits, are the same as a full tile's.
// Launched by LaunchSinglePass (agent_single_pass.cuh): the look-back scan of arrays
// (ArrayBulkIO below) and the segmented scan (segmented_impl.cuh).
#pragma once

#include <cuda/ptx>

#include <type_traits>

#include "gpuscan/kernels/scan_widen.h"
#include "striped.cuh"
#include "tile_state.cuh"

namespace gpuscan::kernels::detail {

// A striped tile of T in shared memory, `tile` its first element: this thread's 16-byte vector of
// row v, and the tile's first `valid` elements out to dst, by one bulk store (thread 0; a full
// tile) or element by element (every thread).
template <class Layout, class T>
__device__ __forceinline__ uint4* SharedVec(T* tile, int v) {
  return reinterpret_cast<uint4*>(tile + Layout::First() + v * Layout::kRowStride);
}
template <int kTile, class T>
__device__ __forceinline__ void StoreTileBulk(T* dst, T* tile) {
#if __CUDA_ARCH__ >= 900
  cuda::ptx::cp_async_bulk(cuda::ptx::space_global, cuda::ptx::space_shared, dst, tile,
                           uint32_t{uint32_t(kTile) * uint32_t(sizeof(T))});
#endif
}
template <int kThreads, class T>
__device__ __forceinline__ void StoreTileElements(T* dst, const T* tile, int valid) {
  for (int i = threadIdx.x; i < valid; i += kThreads) dst[i] = tile[i];
}

// What the bulk kernel reads and writes (its IO parameter), beside the register kernel's hooks
// (PrefetchL2, ExclusiveOut, CarryItem, WriteCarry; agent_single_pass.cuh):
//   Shared                     the tile's shared storage; kLoadBytes: what a full tile's bulk
//                              copies bring
//   Bulk(base)                 whether the full tile at base may move by bulk copies (aligned)
//   LoadBulk(s, base, bar)     thread 0: the bulk copies of a full tile, completing on bar
//   Before(s, base)            thread 0, before the block's first barrier: what the tile needs
//                              from before it
//   LoadElements(s, base, valid)   every thread: the tile element by element (identity past valid)
//   Read(s, v, valid, x)       this thread's items of its striped vector v
//   Write(s, v, x)             what the scan writes for them
//   StoreBulk(s, base) / StoreElements(s, base, valid)   the tile out
// Here: arrays of T, `in` may alias `out`, the carry is a T.
//
// In: the input's element type, converted by Widen<In, T> (scan_widen.h) as it is read (the
// widening scans); T by default, and then nothing changes. A narrower In comes into its own
// shared array (raw) by the same bulk copy; the threads read kVecElems of it at once (the In
// elements under their 16-byte vector of T: 2 to 8 bytes) and convert them, and write their T
// results to the T tile that goes out. A tile moved element by element keeps its In elements
// raw too, and Read puts the identity past `valid` (an In may not hold Op's identity).
template <class T, class Op, int kItems, int kTile, class In = T>
struct ArrayBulkIO {
  using Layout = StripedLayout<T, kItems>;
  using Carry = T;
  static constexpr bool kWidens = !std::is_same_v<In, T>;
  static constexpr int kVecElems = Layout::kVecElems, kThreads = kTile / kItems;
  static constexpr uint32_t kLoadBytes = uint32_t(kTile) * sizeof(In);
  static_assert(kLoadBytes % 16 == 0, "bulk copies move multiples of 16 bytes");
  struct SameShared {
    alignas(128) T items[kTile];
  };
  struct WideShared {
    alignas(128) T items[kTile];  // the scanned tile (out)
    alignas(128) In raw[kTile];   // the input tile, as it came
  };
  using Shared = std::conditional_t<kWidens, WideShared, SameShared>;
  // kVecElems In elements as one shared-memory load.
  static constexpr int kRawBytes = kVecElems * int(sizeof(In));
  using RawWord = std::conditional_t<
      kRawBytes == 2, unsigned short,
      std::conditional_t<kRawBytes == 4, unsigned int, std::conditional_t<kRawBytes == 8, uint2, uint4>>>;
  static_assert(sizeof(RawWord) == kRawBytes || !kWidens, "a vector's In elements load as one word");
  union RawVec {
    RawWord word;
    In item[kVecElems];
  };
  const In* in;
  T* out;

  __device__ __forceinline__ bool Bulk(uint64_t base) const { return Aligned16(in + base) && Aligned16(out + base); }
  __device__ __forceinline__ void PrefetchL2(uint64_t base, int count) const {
    detail::PrefetchL2(in + base, uint32_t(count) * sizeof(In));
  }
  __device__ __forceinline__ void LoadBulk(Shared& s, uint64_t base, uint64_t* bar) const {
#if __CUDA_ARCH__ >= 900
    if constexpr (kWidens) {
      cuda::ptx::cp_async_bulk(cuda::ptx::space_shared, cuda::ptx::space_global, s.raw, in + base, uint32_t{kLoadBytes}, bar);
    } else {
      cuda::ptx::cp_async_bulk(cuda::ptx::space_shared, cuda::ptx::space_global, s.items, in + base, uint32_t{kLoadBytes}, bar);
    }
#endif
  }
  __device__ __forceinline__ void Before(Shared&, uint64_t) const {}
  __device__ __forceinline__ void LoadElements(Shared& s, uint64_t base, int valid) const {
    if constexpr (kWidens) {
      for (int i = threadIdx.x; i < valid; i += kThreads) s.raw[i] = in[base + i];
    } else {
      for (int i = threadIdx.x; i < kTile; i += kThreads) s.items[i] = i < valid ? in[base + i] : Op::identity();
    }
  }
  __device__ __forceinline__ void Read(Shared& s, int v, int valid, T (&x)[kVecElems]) const {
    if constexpr (kWidens) {
      const int first = Layout::First() + v * Layout::kRowStride;
      if (valid == kTile) {
        RawVec w;
        w.word = *reinterpret_cast<const RawWord*>(s.raw + first);
#pragma unroll
        for (int j = 0; j < kVecElems; ++j) x[j] = Widen<In, T>::Convert(w.item[j]);
      } else {
#pragma unroll
        for (int j = 0; j < kVecElems; ++j) x[j] = first + j < valid ? Widen<In, T>::Convert(s.raw[first + j]) : Op::identity();
      }
    } else {
      ItemVec<T, kVecElems> w;
      w.vec[0] = *SharedVec<Layout>(s.items, v);
#pragma unroll
      for (int j = 0; j < kVecElems; ++j) x[j] = w.item[j];
    }
  }
  __device__ __forceinline__ void Write(Shared& s, int v, const T (&x)[kVecElems]) const {
    ItemVec<T, kVecElems> w;
#pragma unroll
    for (int j = 0; j < kVecElems; ++j) w.item[j] = x[j];
    *SharedVec<Layout>(s.items, v) = w.vec[0];
  }
  __device__ __forceinline__ void StoreBulk(Shared& s, uint64_t base) const { StoreTileBulk<kTile>(out + base, s.items); }
  __device__ __forceinline__ void StoreElements(Shared& s, uint64_t base, int valid) const {
    StoreTileElements<kThreads>(out + base, s.items, valid);
  }
  __device__ __forceinline__ static T ExclusiveOut(T run, const T& /*x*/) { return run; }
  __device__ __forceinline__ static T CarryItem(const Carry& c) { return c; }
  __device__ __forceinline__ void WriteCarry(Carry* c, T value, uint64_t /*n*/) const { *c = value; }
};

// Item: what the scan combines with Op (T for arrays, a (head, value) pair for segmented scans).
template <class Item, class Op, class Policy, class IO>
__global__ void __launch_bounds__(Policy::kThreads, Policy::kMinBlocks)
    SinglePassScanBulkKernel(IO io, uint64_t n, uint32_t num_tiles, bool exclusive, const typename IO::Carry* carry_in,
                             typename IO::Carry* carry_out, TempHeader* header, TileWord* tiles) {
  constexpr int kThreads = Policy::kThreads, kTile = Policy::kTile;
  constexpr int kWarps = kThreads / kWarpThreads;
  constexpr int kVecs = IO::Layout::kVecs, kVecElems = IO::Layout::kVecElems;
  __shared__ typename IO::Shared s_data;
  __shared__ alignas(8) uint64_t s_full;  // mbarrier: the bulk load has landed
  __shared__ Item s_warp_total[kWarps];
  __shared__ uint32_t s_tile;
  __shared__ unsigned long long s_epoch;
  __shared__ bool s_bulk;
  __shared__ Item s_prefix;
  const Op op;

  if (threadIdx.x == 0) {
    // A small launch takes its tiles by block index and draws the ticket (for the epoch, and so
    // that the last draw starts the next) after asking for the tile: the atomic's round trip
    // then overlaps the load instead of coming before it (kIndexedTilesMax, tuning.cuh).
    const bool indexed = num_tiles <= kIndexedTilesMax;
    uint32_t t = blockIdx.x;
    unsigned long long e = 0;
    if (!indexed) {
      PrefetchLikelyTile<kTile>(num_tiles, n, [io](uint64_t g) { io.PrefetchL2(g, kTile); });
      DrawTicket(header, num_tiles, t, e);
    }
    const uint64_t b = static_cast<uint64_t>(t) * kTile;
#if __CUDA_ARCH__ >= 900
    const bool bulk = n - b >= uint64_t(kTile) && io.Bulk(b);
#else
    constexpr bool bulk = false;
#endif
    if (bulk) {
#if __CUDA_ARCH__ >= 900
      cuda::ptx::mbarrier_init(&s_full, 1);
      cuda::ptx::fence_mbarrier_init(cuda::ptx::sem_release, cuda::ptx::scope_cluster);
      cuda::ptx::mbarrier_arrive_expect_tx(cuda::ptx::sem_release, cuda::ptx::scope_cta, cuda::ptx::space_shared,
                                           &s_full, uint32_t{IO::kLoadBytes});
      io.LoadBulk(s_data, b, &s_full);
#endif
    }
    io.Before(s_data, b);
    if (indexed) {
      uint32_t ticket = 0;
      DrawTicket(header, num_tiles, ticket, e);
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
    io.LoadElements(s_data, base, tile_valid);
    __syncthreads();
  }

  Item row_excl[kVecs];  // combination of the tile's elements before each of my vectors
  const Item block_total = StripedRowPrefixes<Item, Op>(
      [&](int v) {
        Item x[kVecElems];
        io.Read(s_data, v, tile_valid, x);
        Item s = x[0];
#pragma unroll
        for (int j = 1; j < kVecElems; ++j) s = op(s, x[j]);
        return s;
      },
      row_excl, s_warp_total);

  if (threadIdx.x < kWarpThreads) {
    Item prefix;
    if (tile == 0) {
      prefix = carry_in != nullptr ? IO::CarryItem(*carry_in) : Op::identity();
      if (threadIdx.x == 0) PublishTile(tiles, 0, epoch, kFlagInclusive, op(prefix, block_total));
    } else {
      if (threadIdx.x == 0) PublishTile(tiles, tile, epoch, kFlagPartial, block_total);
      prefix = LookBack<Item, Op, Policy::kFirstDelayNs, Policy::kPollDelayNs>(tiles, tile, epoch,
                                                                               num_tiles >= Policy::kDelayMinTiles);
      if (threadIdx.x == 0) PublishTile(tiles, tile, epoch, kFlagInclusive, op(prefix, block_total));
    }
    if (threadIdx.x == 0) {
      s_prefix = prefix;
      if (carry_out != nullptr && tile == num_tiles - 1) io.WriteCarry(carry_out, op(prefix, block_total), n);
    }
  }
  __syncthreads();
  const Item prefix = s_prefix;

#pragma unroll
  for (int v = 0; v < kVecs; ++v) {
    Item x[kVecElems];
    io.Read(s_data, v, tile_valid, x);
    Item run = op(prefix, row_excl[v]);
#pragma unroll
    for (int j = 0; j < kVecElems; ++j) {
      if (exclusive) {
        const Item e = IO::ExclusiveOut(run, x[j]);
        run = op(run, x[j]);
        x[j] = e;
      } else {
        run = op(run, x[j]);
        x[j] = run;
      }
    }
    io.Write(s_data, v, x);
  }
  if (bulk) {
#if __CUDA_ARCH__ >= 900
    // The copy engine reads shared memory through the async proxy: make the threads' writes
    // visible to it, then one thread stores the tile and waits until it has been read out.
    cuda::ptx::fence_proxy_async(cuda::ptx::space_shared);
    __syncthreads();
    if (threadIdx.x == 0) {
      io.StoreBulk(s_data, base);
      cuda::ptx::cp_async_bulk_commit_group();
      cuda::ptx::cp_async_bulk_wait_group_read(cuda::ptx::n32_t<0>{});
    }
#endif
  } else {
    __syncthreads();
    io.StoreElements(s_data, base, tile_valid);
  }
}

}  // namespace gpuscan::kernels::detail
