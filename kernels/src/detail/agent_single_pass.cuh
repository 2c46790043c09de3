// Single-pass scan: one launch reads n elements and writes n. Each block draws a tile ticket
// (so the look-back never waits on a block that has not started, whatever order the hardware
// schedules blocks in), scans its tile, learns the prefix of everything before it from its
// predecessors' tile states, and writes.
//   kChained = false: decoupled look-back (publish the tile's own sum at once, look back over
//                     32 predecessors at a time).
//   kChained = true:  wait for the predecessor's inclusive prefix only.
//
// Tile layout (Policy::kStriped): each warp owns 32 * kItems consecutive elements, which it
// moves as kVecs rows of 32 lane-interleaved 16-byte vectors (every load and store instruction
// of the warp covers 512 contiguous bytes). A thread scans its vectors, the warp scans each row
// with shuffles, the rows chain, then the warps. The blocked layout (each thread kItems
// consecutive elements) is kept as a policy option; it lost by a third at 2^28 (tuning.cuh).
#pragma once

#include <algorithm>

#include "agent_single_pass_bulk.cuh"
#include "block_scan.cuh"
#include "striped.cuh"
#include "tile_state.cuh"

namespace gpuscan::kernels::detail {

// What a single-pass scan reads and writes (the kernel's IO parameter): here arrays of T, `in`
// may alias `out`, and the carry is a T. Reduce by key reads values and keys and writes runs
// (reduce_by_key_impl.cuh), through the same hooks:
//   Layout             the striped layout the tile moves in (its rows shape the block scan)
//   Vector(valid)      whether a tile of `valid` elements moves as 16-byte vectors
//   Load / Store       a tile's items, in the layout
//   PrefetchL2(base, count)  asks L2 for a full tile's bytes before the ticket (a hint)
//   ExclusiveOut(r, x) what an exclusive scan writes for item x, r being the items before it
//   CarryItem / WriteCarry   the carry in and out of the call
template <class T, class Op, int kItems>
struct ArrayTileIO {
  using Layout = StripedLayout<T, kItems>;
  using Carry = T;
  const T* in;
  T* out;

  __device__ __forceinline__ bool Vector(int tile_valid, int tile) const {
    return tile_valid == tile && Aligned16(in) && Aligned16(out);
  }
  __device__ __forceinline__ void PrefetchL2(uint64_t base, int count) const {
    detail::PrefetchL2(in + base, uint32_t(count) * sizeof(T));
  }
  __device__ __forceinline__ void Load(uint64_t base, int tile_valid, bool vec, T (&items)[kItems]) const {
    Layout::Load(in + base, tile_valid, vec, Op::identity(), items);
  }
  __device__ __forceinline__ void Store(uint64_t base, int tile_valid, bool vec, const T (&items)[kItems]) const {
    Layout::Store(out + base, tile_valid, vec, items);
  }
  __device__ __forceinline__ static T ExclusiveOut(T run, const T& /*x*/) { return run; }
  __device__ __forceinline__ static T CarryItem(const Carry& c) { return c; }
  __device__ __forceinline__ void WriteCarry(Carry* c, T value, uint64_t /*n*/) const { *c = value; }
};

template <class T, class Op, class Policy, bool kChained, class IO = ArrayTileIO<T, Op, Policy::kItems>>
__global__ void __launch_bounds__(Policy::kThreads, Policy::kMinBlocks)
    SinglePassScanKernel(IO io, uint64_t n, uint32_t num_tiles, bool exclusive, const typename IO::Carry* carry_in,
                         typename IO::Carry* carry_out, TempHeader* header, TileWord* tiles) {
  constexpr int kThreads = Policy::kThreads, kItems = Policy::kItems, kTile = Policy::kTile;
  constexpr int kWarps = kThreads / kWarpThreads;
  using Layout = typename IO::Layout;
  constexpr int kVecs = Layout::kVecs, kVecElems = Layout::kVecElems;
  using BlockedScan = BlockScan<T, Op, kThreads, BlockScanAlgo::kWarpShuffle>;
  __shared__ typename BlockedScan::Storage blocked_storage;
  __shared__ T s_warp_total[kWarps];
  __shared__ uint32_t s_tile;
  __shared__ unsigned long long s_epoch;
  __shared__ T s_prefix;
  const Op op;

  if (threadIdx.x == 0) {
    uint32_t t;
    unsigned long long e;
    // The IO captured by value: by reference, reduce by key's machine code changed (its Load
    // writes to its IO); by value every kernel's is as it was without the helper.
    if constexpr (!kChained) PrefetchLikelyTile<kTile>(num_tiles, n, [io](uint64_t g) { io.PrefetchL2(g, kTile); });
    DrawTicket(header, num_tiles, t, e);
    s_tile = t;
    s_epoch = e;
  }
  __syncthreads();
  const uint32_t tile = s_tile;
  const unsigned long long epoch = s_epoch;
  const uint64_t base = static_cast<uint64_t>(tile) * kTile;
  const int tile_valid = n - base >= uint64_t(kTile) ? kTile : int(n - base);
  const bool vec = io.Vector(tile_valid, kTile);

  T items[kItems];
  T row_excl[kVecs];  // striped: combination of the tile's elements before each of my vectors
  T thread_excl{};    // blocked: combination of the block's elements before mine
  T block_total;
  if constexpr (Policy::kStriped) {
    io.Load(base, tile_valid, vec, items);
    auto row_sum = [&](int v) {
      T s = items[v * kVecElems];
#pragma unroll
      for (int j = 1; j < kVecElems; ++j) s = op(s, items[v * kVecElems + j]);
      return s;
    };
    block_total = StripedRowPrefixes<T, Op>(row_sum, row_excl, s_warp_total);
  } else {
    const int valid = ThreadValid(tile_valid, kItems);
    LoadItems<T, kItems>(io.in + base + uint64_t(threadIdx.x) * kItems, valid, vec, Op::identity(), items);
    T sum = items[0];
#pragma unroll
    for (int i = 1; i < kItems; ++i) sum = op(sum, items[i]);
    BlockedScan::ExclusiveScan(sum, thread_excl, block_total, blocked_storage);
  }

  if (threadIdx.x < kWarpThreads) {
    T prefix;
    if (tile == 0) {
      prefix = carry_in != nullptr ? io.CarryItem(*carry_in) : Op::identity();
      if (threadIdx.x == 0) PublishTile(tiles, 0, epoch, kFlagInclusive, op(prefix, block_total));
    } else if constexpr (kChained) {
      if (threadIdx.x == 0) {
        prefix = WaitInclusive<T>(tiles, tile - 1, epoch);
        PublishTile(tiles, tile, epoch, kFlagInclusive, op(prefix, block_total));
      }
    } else {
      if (threadIdx.x == 0) PublishTile(tiles, tile, epoch, kFlagPartial, block_total);
      prefix = LookBack<T, Op, Policy::kFirstDelayNs, Policy::kPollDelayNs>(
          tiles, tile, epoch, num_tiles >= Policy::kDelayMinTiles);
      if (threadIdx.x == 0) PublishTile(tiles, tile, epoch, kFlagInclusive, op(prefix, block_total));
    }
    if (threadIdx.x == 0) {
      s_prefix = prefix;
      if (carry_out != nullptr && tile == num_tiles - 1) io.WriteCarry(carry_out, op(prefix, block_total), n);
    }
  }
  __syncthreads();
  const T prefix = s_prefix;

  // Each run of consecutive elements a thread holds is scanned from its starting prefix.
  auto scan_run = [&](T run, int first, int count) {
    if (exclusive) {
#pragma unroll
      for (int i = 0; i < count; ++i) {
        const T x = items[first + i];
        items[first + i] = IO::ExclusiveOut(run, x);
        run = op(run, x);
      }
    } else {
#pragma unroll
      for (int i = 0; i < count; ++i) {
        run = op(run, items[first + i]);
        items[first + i] = run;
      }
    }
  };
  if constexpr (Policy::kStriped) {
#pragma unroll
    for (int v = 0; v < kVecs; ++v) scan_run(op(prefix, row_excl[v]), v * kVecElems, kVecElems);
    io.Store(base, tile_valid, vec, items);
  } else {
    scan_run(op(prefix, thread_excl), 0, kItems);
    StoreItems<T, kItems>(io.out + base + uint64_t(threadIdx.x) * kItems, ThreadValid(tile_valid, kItems), vec, items);
  }
}

// ---------------------------------------------------------------------------------------------
// Host side.

// Temp storage body of a single-pass call of n elements: one tile word per tile of a launch.
template <class Policy>
std::size_t SinglePassBody(uint64_t n) {
  const uint64_t num_tiles = DivUp(n, Policy::kTile);
  return std::min<uint64_t>(std::max<uint64_t>(num_tiles, 1), MaxTilesPerLaunch()) * sizeof(TileWord);
}

// Where a long call's launches hand their carry on: two alternating values in the temp header.
template <class C>
C* CarrySlot(TempHeader* h, int k) {
  constexpr int kWords = int(DivUp(sizeof(C), 8));
  static_assert(2 * kWords <= int(sizeof(h->slot) / 8), "the header holds two carries");
  return reinterpret_cast<C*>(&h->slot[(k & 1) * kWords]);
}

// Launches SinglePassScanKernel (kBulk: SinglePassScanBulkKernel, with a bulk IO) over n > 0
// elements in as many launches as the tile tickets allow (kMaxTilesPerLaunch), each continuing
// the one before through a carry slot. io_at(off, carry_in) is the IO of the launch that starts
// at element `off`.
template <class Item, class Op, class Policy, bool kChained, class IO, bool kBulk = false, class IOAt>
cudaError_t LaunchSinglePass(const TempView& view, uint64_t n, bool exclusive, const typename IO::Carry* carry_in,
                             typename IO::Carry* carry_out, cudaStream_t stream, IOAt io_at) {
  using Carry = typename IO::Carry;
  auto* tiles = reinterpret_cast<TileWord*>(view.body);
  const uint64_t launch_items = uint64_t(SinglePassBody<Policy>(n) / sizeof(TileWord)) * Policy::kTile;
  const Carry* cin = carry_in;
  int k = 0;
  for (uint64_t off = 0; off < n; off += launch_items, ++k) {
    const uint64_t m = std::min(launch_items, n - off);
    Carry* cout = off + m == n ? carry_out : CarrySlot<Carry>(view.header, k);
    const auto t = static_cast<uint32_t>(DivUp(m, Policy::kTile));
    if constexpr (kBulk) {
      static_assert(!kChained, "the bulk kernel looks back");
      SinglePassScanBulkKernel<Item, Op, Policy, IO>
          <<<t, Policy::kThreads, 0, stream>>>(io_at(off, cin), m, t, exclusive, cin, cout, view.header, tiles);
    } else {
      SinglePassScanKernel<Item, Op, Policy, kChained, IO>
          <<<t, Policy::kThreads, 0, stream>>>(io_at(off, cin), m, t, exclusive, cin, cout, view.header, tiles);
    }
    GPUSCAN_CHECK_LAUNCH();
    cin = cout;
  }
  return cudaSuccess;
}

}  // namespace gpuscan::kernels::detail
