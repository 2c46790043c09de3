// The canonical float tree on the device (see gpuscan/kernels/canonical_tree.h for the
// definition, which the host functions there compute too). Every operation below mirrors one
// of those host functions: same operands, same association.
//
//   TileAggKernel   one block per tile: segment folds (16 items per thread), Hillis-Steele
//                   over the 256 totals, A = Q[255]
//   SuperKernel     one block per super touched: Hillis-Steele over its tile aggregates (the
//                   first super's earlier tiles come from the state), the super's total
//   CarryKernel     one block: the sequential carry over the supers touched, into the state
// Those three serve reductions (the input read once). Scans take OnePassKernel (below), which
// reads the input once too and computes the same operations.
#pragma once

#include <cuda_pipeline.h>

#include <algorithm>
#include <type_traits>

#include "common.cuh"
#include "gpuscan/kernels/canonical_scan.h"
#include "gpuscan/kernels/scan_widen.h"
#include "device_facts.cuh"
#include "tile_state.cuh"
#include "tuning.cuh"

namespace gpuscan::kernels::detail::canonical {

constexpr int kThreads = 256;  // = segments per tile = tiles per super
constexpr int kItems = 16;     // = items per segment
constexpr int kTile = kThreads * kItems;

// How a tile sits in shared memory. Thread t folds its segment (items 16t..16t+15); loads and
// stores to global memory are striped (item r * kThreads + t is thread t's r-th).
//  - 4-byte types: 16-byte vectors, eight to a 128-byte row (all 32 banks), each row's vectors
//    XOR-swizzled by its row number (its low two bits). A segment is read and written as 4
//    vectors, and the 8 threads of one 128-bit access phase (a quarter-warp) touch 8 different
//    bank groups; so do the striped 16-byte copies to and from global memory. The padded layout
//    before took 16 scalar accesses a segment (float32 +2.6 points of copy on the H200).
//    2-byte inputs (the widening scan's float16, scan_widen.h) take the same layout, eight items
//    a vector: a segment is two vectors, and the swizzle keeps a quarter-warp's on 8 bank groups.
//  - 8-byte types: one padding item per 16 (a half-warp's 64-bit accesses then fall on 16
//    different bank pairs), items one at a time: the vector layout ran float64 4 points slower
//    on the H200 (bench/NOTES.md, 2026-11-26).
template <class T>
constexpr bool kVectorTile = sizeof(T) == 4 || sizeof(T) == 2;
template <class T>
constexpr int kVec = 16 / static_cast<int>(sizeof(T));  // items a vector
constexpr int kPadEvery = 16;                              // 8-byte types: a padding item per 16
template <class T>
constexpr int kSmemItems = kVectorTile<T> ? kTile : kTile + kTile / kPadEvery;

template <class T>
struct alignas(16) Vec {
  T v[kVec<T>];
};

// Where vector k of a 4-byte tile sits (in vectors).
__device__ __forceinline__ int VecSlot(int k) { return k ^ ((k >> 3) & 3); }
// Where item i of a tile sits (in items).
template <class T>
__device__ __forceinline__ int ItemSlot(int i) {
  if constexpr (kVectorTile<T>) {
    return VecSlot(i / kVec<T>) * kVec<T> + i % kVec<T>;
  } else {
    return i + static_cast<int>(static_cast<unsigned>(i) / kPadEvery);
  }
}
// Where thread tid's r-th striped item (r * kThreads + tid) sits. The swizzle repeats every
// 8 * 16 items, so for vector tiles it is r * kThreads after the first (one address to keep,
// not 16); padded tiles keep the addressing their timed code had.
template <class T>
__device__ __forceinline__ int StripeSlot(int tid, int r) {
  static_assert(kThreads % (8 * kItems) == 0, "a stripe of kThreads items is whole swizzle periods");
  if constexpr (kVectorTile<T>) {
    return ItemSlot<T>(tid) + r * kThreads;
  } else {
    return ItemSlot<T>(r * kThreads + tid);
  }
}
template <class T>
__device__ __forceinline__ Vec<T>& VecAt(T* items, int k) {
  return *reinterpret_cast<Vec<T>*>(items + VecSlot(k) * kVec<T>);
}
template <class T>
__device__ __forceinline__ const Vec<T>& VecAt(const T* items, int k) {
  return *reinterpret_cast<const Vec<T>*>(items + VecSlot(k) * kVec<T>);
}

// 16-byte aligned for vector tiles only (an alignment that other types' code could exploit
// would change their machine code for nothing).
template <class T>
constexpr std::size_t kSmemAlign = kVectorTile<T> ? 16 : alignof(T);

template <class T>
struct alignas(kSmemAlign<T>) TileSmem {
  T items[kSmemItems<T>];
  T hs[2][kThreads];
};

// This thread's segment out of a tile in shared memory, and back.
template <class T>
__device__ __forceinline__ void ReadSegment(const T* items, T (&x)[kItems]) {
  if constexpr (kVectorTile<T>) {
#pragma unroll
    for (int v = 0; v < kItems / kVec<T>; ++v) {
      const Vec<T> q = VecAt(items, threadIdx.x * (kItems / kVec<T>) + v);
#pragma unroll
      for (int k = 0; k < kVec<T>; ++k) x[v * kVec<T> + k] = q.v[k];
    }
  } else {
#pragma unroll
    for (int i = 0; i < kItems; ++i) x[i] = items[ItemSlot<T>(threadIdx.x * kItems + i)];
  }
}
template <class T>
__device__ __forceinline__ void WriteSegment(T* items, const T (&y)[kItems]) {
  if constexpr (kVectorTile<T>) {
#pragma unroll
    for (int v = 0; v < kItems / kVec<T>; ++v) {
      Vec<T> q;
#pragma unroll
      for (int k = 0; k < kVec<T>; ++k) q.v[k] = y[v * kVec<T> + k];
      VecAt(items, threadIdx.x * (kItems / kVec<T>) + v) = q;
    }
  } else {
#pragma unroll
    for (int i = 0; i < kItems; ++i) items[ItemSlot<T>(threadIdx.x * kItems + i)] = y[i];
  }
}

// Striped (coalesced) loads, 16 bytes each for 4-byte types where `in` allows, then each thread
// takes its segment's 16 consecutive items.
template <class T>
__device__ __forceinline__ void LoadSegment(const T* in, T (&x)[kItems], TileSmem<T>& sm) {
  const int tid = threadIdx.x;
  if (kVectorTile<T> && Aligned16(in)) {
#pragma unroll
    for (int r = 0; r < kTile / kVec<T> / kThreads; ++r) {
      const int k = r * kThreads + tid;
      VecAt(sm.items, k) = reinterpret_cast<const Vec<T>*>(in)[k];
    }
  } else {
#pragma unroll
    for (int r = 0; r < kItems; ++r) sm.items[StripeSlot<T>(tid, r)] = in[r * kThreads + tid];
  }
  __syncthreads();
  ReadSegment(sm.items, x);
}

template <class T, class Op>
__device__ __forceinline__ T SegmentFold(const T (&x)[kItems]) {
  const Op op;
  T t = x[0];
#pragma unroll
  for (int i = 1; i < kItems; ++i) t = op(t, x[i]);
  return t;
}

// Inclusive Hillis-Steele over the block's 256 values, level by level as canon::HillisSteele
// (y[i] = y[i-d] op y[i], all reads from the level before). Double-buffered: one barrier per
// level suffices, since a buffer is rewritten two levels later, after a barrier every reader
// of it has passed. Leaves `buf` = the next free buffer parity (8 levels: 0).
template <class T, class Op>
__device__ __forceinline__ T BlockHillisSteele(T v, T (&hs)[2][kThreads]) {
  const Op op;
  const int tid = threadIdx.x;
  int buf = 0;
#pragma unroll
  for (int d = 1; d < kThreads; d <<= 1, buf ^= 1) {
    hs[buf][tid] = v;
    __syncthreads();
    if (tid >= d) v = op(hs[buf][tid - d], v);
  }
  return v;
}

// y[p] of the last level of BlockHillisSteele over vals[0..p] (p < 256), by one warp, valid in
// lane 0: the same operations on the same operands, only the nodes y[p] does not depend on are
// skipped. Lane L takes positions p - 8L - 7 .. p - 8L: levels d = 1, 2, 4 in registers, then
// d = 8 .. 128 by shuffles (lane L's node at level d reads lane L + d/8's).
template <class T, class Op>
__device__ __forceinline__ T WarpConeHillisSteele(const T* vals, int p) {
  const Op op;
  const int top = p - 8 * LaneId();
  T v[8];
#pragma unroll
  for (int k = 0; k < 8; ++k) v[k] = top - k >= 0 ? vals[top - k] : T{};
  T w[4];
#pragma unroll
  for (int m = 0; m < 4; ++m) w[m] = top - 2 * m >= 1 ? op(v[2 * m + 1], v[2 * m]) : v[2 * m];
  T u[2];
#pragma unroll
  for (int n = 0; n < 2; ++n) u[n] = top - 4 * n >= 2 ? op(w[2 * n + 1], w[2 * n]) : w[2 * n];
  T z = top >= 4 ? op(u[1], u[0]) : u[0];
#pragma unroll
  for (int s = 1, d = 8; d < kThreads; s <<= 1, d <<= 1) {
    const T y = ShflDown(z, s);
    if (top >= d) z = op(y, z);
  }
  return z;
}

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

// ---------------------------------------------------------------------------------------------
// One pass (scans): each tile is read once. The tree's cross-tile parts are taken from other
// tiles as they publish them, always at the same positions, so the bits are the two-pass
// bits; only the waiting changes.
//   - A tile publishes its aggregate A as soon as it has it (phase 1).
//   - Tile j of a super waits for the aggregates of tiles 0..j-1 of its super and computes
//     P[j-1] itself (Hillis-Steele over them: y[j-1] depends on y[0..j-1] only; one warp
//     computes just that node's cone, WarpConeHillisSteele) (phase 2).
//   - The super's total T_b = P[255] is computed from all the super's aggregates once its last
//     tile is through phase 1, by the block that holds that tile: with three tiles a block,
//     during the phase 2 of its tile before, so that the block waits once for the longer of that
//     tile's carry and the aggregates, not for one after the other (float32 +1.5-2 points of
//     copy on the H100, +5 on the H200); with two, and for a block's first tile, right after
//     the tile's phase 1.
//   - The carry C_{b+1} = C_b op T_b (C_0: the state's). Whoever needs C_b polls C_b, C_{b-1} and
//     T_{b-1} together and takes C_b, or folds it from the other two as soon as they are out;
//     only the super's first tile publishes what it folded (every tile of the super publishing
//     its copy cost 19 points of copy for float32: stores to the words all of them poll). If
//     C_{b-1} is not out either, it folds from the nearest published C_k and T_k..T_{b-1}, in that
//     order, publishing each. The same sequential fold whoever computes it, and no hop waits for
//     a block to reach a tile.
// Blocks are persistent and keep three tiles: the next-but-one loading (cp.async), the next in
// phase 1, the current in phase 2. So a tile's aggregate is out a whole tile before its
// successors need it, and a block waiting for its predecessors still has bytes in flight (the
// wait was ~20 points of copy, bench/NOTES.md). 8-byte types keep two (CanonicalTuning: three
// would leave two blocks a SM): the next tile's load then starts once the current one is stored.
// No global round trip sits on a block's path a tile: tickets are drawn an iteration ahead, and
// a block counts its finished tiles once, at its end (the two were ~6 points of copy).
// Tiles are numbered by tickets drawn in order, and a tile waits only for lower tickets, each
// held by a block whose earlier tiles wait only for lower tickets still: the lowest unfinished
// ticket can always proceed, so no deadlock whatever order blocks are scheduled in (a ticket
// drawn ahead is lower than none its block waits for). Launches of at most kIndexedTilesMax
// tiles take tile blockIdx.x instead: so few blocks cannot hold every place where a lower tile
// they wait for could run.

// Aggregates, totals and carries travel as tile words (tile_state.cuh), published inclusive and
// read with WaitInclusive: {status, value} written and read whole, tagged with the launch's
// epoch, so the temp storage may hold any earlier single-pass launch's words (the temp
// contract) and nothing needs clearing.

// Where a block computes a super's total T_b (see OnePassKernel): beside its carry wait with
// three tiles a block; with two (8-byte types), in the super's last tile's phase 1, as the
// overlap cost float64 0.5-1.5 points on the H200 (bench/NOTES.md, "the total beside the carry").
template <int kStages>
constexpr bool kTotalBesideCarry = kStages == 3;

// In: the input's element type (the widening scan's; T for the others). A narrower In keeps its
// stages as loaded and stages the scanned tile apart (out), for the store.
template <class T, int kStages, class In = T, bool kSame = std::is_same_v<In, T>>
struct alignas(kSmemAlign<T>) OnePassSmem {
  T items[kStages][kSmemItems<T>];
  T hs[2][kThreads];
  T totals_in[kTotalBesideCarry<kStages> ? kThreads : 1];  // the aggregates of the super t1 ends
};
template <class T, int kStages, class In>
struct alignas(kSmemAlign<T> > kSmemAlign<In> ? kSmemAlign<T> : kSmemAlign<In>) OnePassSmem<T, kStages, In, false> {
  In items[kStages][kSmemItems<In>];
  T out[kSmemItems<T>];
  T hs[2][kThreads];
  T totals_in[kTotalBesideCarry<kStages> ? kThreads : 1];
};

// Where the scanned tile of stage buf is staged for its store: the stage itself, or `out`.
template <class T, int kStages, class In>
__device__ __forceinline__ T* OutSlots(OnePassSmem<T, kStages, In>& ps, int buf) {
  if constexpr (std::is_same_v<In, T>) {
    return ps.items[buf];
  } else {
    return ps.out;
  }
}

// ReadSegment of a tile of In, converted to T (Widen, scan_widen.h).
template <class T, class In>
__device__ __forceinline__ void ReadSegmentAs(const In* items, T (&x)[kItems]) {
  if constexpr (std::is_same_v<In, T>) {
    ReadSegment(items, x);
  } else {
    In raw[kItems];
    ReadSegment(items, raw);
#pragma unroll
    for (int i = 0; i < kItems; ++i) x[i] = Widen<In, T>::Convert(raw[i]);
  }
}

// Starts the copy of tile t's elements into items (striped: 16 bytes a copy when `vec`, the
// input being 16-byte aligned, for 4-byte types; else an item a copy).
template <class T>
__device__ __forceinline__ void IssueTileLoad(const T* in, uint32_t t, T* items, bool vec) {
  const int tid = threadIdx.x;
  const T* src = in + static_cast<uint64_t>(t) * kTile;
  if (kVectorTile<T> && vec) {
#pragma unroll
    for (int r = 0; r < kTile / kVec<T> / kThreads; ++r) {
      const int k = r * kThreads + tid;
      __pipeline_memcpy_async(&VecAt(items, k), src + k * kVec<T>, sizeof(Vec<T>));
    }
  } else if constexpr (sizeof(T) < 4) {  // cp.async copies 4, 8 or 16 bytes: plain loads
#pragma unroll
    for (int r = 0; r < kItems; ++r) items[StripeSlot<T>(tid, r)] = src[r * kThreads + tid];
  } else {
#pragma unroll
    for (int r = 0; r < kItems; ++r) {
      __pipeline_memcpy_async(&items[StripeSlot<T>(tid, r)], &src[r * kThreads + tid], sizeof(T));
    }
  }
}

// Stores a scanned tile from shared memory (striped, as IssueTileLoad).
template <class T>
__device__ __forceinline__ void StoreTile(const T* items, T* dst, bool vec) {
  const int tid = threadIdx.x;
  if (kVectorTile<T> && vec) {
#pragma unroll
    for (int r = 0; r < kTile / kVec<T> / kThreads; ++r) {
      const int k = r * kThreads + tid;
      reinterpret_cast<Vec<T>*>(dst)[k] = VecAt(items, k);
    }
  } else {
#pragma unroll
    for (int r = 0; r < kItems; ++r) dst[r * kThreads + tid] = items[StripeSlot<T>(tid, r)];
  }
}

// Where a launch's tile words live.
template <class T>
struct OnePassWords {
  TileWord* aggs;     // A of each tile of the launch
  TileWord* totals;   // T_b of each super b the launch completes
  TileWord* carries;  // C_b, b >= 1
  unsigned long long epoch;
  uint32_t tiles;
  int j0;
  int fresh;  // the array's first launch: the state is written, not read (it may hold anything)
  int walk_only;  // tests: every C_b by the walk back (testing_hooks::SetCanonicalCarryWalk)
  CanonicalState<T>* state;

  __device__ T StateCarry(int& has) const {
    has = fresh ? 0 : state->has_carry;
    return fresh ? T{} : state->carry;
  }

  // The word of A at position p of super b; null when the state holds it (then in value).
  __device__ const TileWord* AggregateWord(uint32_t b, int p, T& value) const {
    if (b == 0 && p < j0) {
      value = state->aggs[p];
      return nullptr;
    }
    return aggs + (b * kThreads + p - j0);
  }

  __device__ T Aggregate(uint32_t b, int p) const {  // A at position p of super b
    T value{};
    const TileWord* word = AggregateWord(b, p, value);
    return word != nullptr ? WaitInclusive<T>(word, 0, epoch) : value;
  }

  // C_b and whether it exists (b == 0: the state's), by one thread. C_b = C_{b-1} op T_{b-1} is
  // published if `publish`; the walk further back publishes every C it folds.
  template <class Op>
  __device__ T Carry(uint32_t b, int& has, bool publish) const {
    const Op op;
    if (b == 0) return StateCarry(has);
    has = 1;
    // The usual case: C_b is out, or C_{b-1} is and T_{b-1} is about to be. One round trip a poll.
    for (int polls = 0; !(walk_only && b > 1); ++polls) {
      unsigned long long c_st, c_bits, p_st = 0, p_bits = 0, t_st, t_bits;
      LoadTileWord(carries + b, c_st, c_bits);
      if (b > 1) LoadTileWord(carries + b - 1, p_st, p_bits);
      LoadTileWord(totals + b - 1, t_st, t_bits);
      if (IsInclusive<T>(c_st, epoch)) return TileCodec<T>::Decode(c_bits, c_st);
      const bool have_prev = b == 1 || IsInclusive<T>(p_st, epoch);  // C_0 is always there
      if (have_prev && IsInclusive<T>(t_st, epoch)) {
        int prev_has = 1;
        const T prev = b == 1 ? StateCarry(prev_has) : TileCodec<T>::Decode(p_bits, p_st);
        const T total = TileCodec<T>::Decode(t_bits, t_st);
        const T c = prev_has ? op(prev, total) : total;
        if (publish) PublishTile(carries, b, epoch, kFlagInclusive, c);
        return c;
      }
      if (!have_prev && polls >= 8) break;
      __nanosleep(64);
    }
    // C_{b-1} is not out either: the nearest C_k that is, k < b (C_0 is always there: the state).
    uint32_t k = b - 1;
    T c{};
    while (true) {
      unsigned long long status, bits;
      LoadTileWord(carries + k, status, bits);
      if (IsInclusive<T>(status, epoch)) {
        c = TileCodec<T>::Decode(bits, status);
        break;
      }
      if (--k == 0) {
        c = StateCarry(has);
        break;
      }
    }
    for (; k < b; ++k) {
      const T total = WaitInclusive<T>(totals, k, epoch);
      c = has ? op(c, total) : total;
      has = 1;
      PublishTile(carries, k + 1, epoch, kFlagInclusive, c);
    }
    return c;
  }
};

// In: the input's element type, converted to T as each segment is read (the widening scan,
// scan_widen.h); T for the plain scans, whose code this leaves as it was.
template <class T, class Op, int kStages, class In = T>
__global__ void __launch_bounds__(kThreads)
    OnePassKernel(const In* in, T* out, bool exclusive, TempHeader* header, OnePassWords<T> w) {
  static_assert(sizeof(T) <= 8, "a tile word carries up to 8 value bytes");
  static_assert(kStages == 2 || kStages == 3, "two or three tiles a block");
  static_assert(std::is_same_v<In, T> || kVectorTile<In>, "a narrower input moves in 16-byte vectors");
  extern __shared__ __align__(16) unsigned char smem_raw[];
  auto& ps = *reinterpret_cast<OnePassSmem<T, kStages, In>*>(smem_raw);
  __shared__ uint32_t s_tile;
  __shared__ unsigned long long s_epoch;
  __shared__ int s_flag;
  __shared__ T s_carry;  // C_b, when s_flag
  __shared__ T s_p;      // P[j-1], when j > 0
  __shared__ int s_last;
  const Op op;
  const int tid = threadIdx.x;
  const uint32_t tiles = w.tiles;
  const bool vec = Aligned16(in) && Aligned16(out);  // tiles move 16 bytes a copy
  // Thread 0 draws each ticket an iteration before the block needs it, so the atomic's round
  // trip is off the block's path (waited for at the start only). Every block draws until a
  // ticket is past the launch's tiles, one such draw each: tiles + gridDim.x draws in all, and
  // the very last starts the next epoch.
  // A launch of at most kIndexedTilesMax tiles (a small call: one tile a block) takes tile
  // blockIdx.x and asks for it at once; the one draw each block makes then only reads the epoch
  // (the last draw starts the next), its round trip beside the load's (tuning.cuh).
  const bool indexed = tiles <= kIndexedTilesMax && tiles <= gridDim.x;
  unsigned long long ahead = 0;
  if (tid == 0 && !indexed) ahead = atomicAdd(&header->epoch_ticket, 1ull);
  uint32_t drawn = 0;
  auto draw = [&]() {
    __syncthreads();  // s_tile's last value is read
    if (tid == 0) {
      s_tile = static_cast<uint32_t>(ahead & kTicketMask);
      s_epoch = ahead >> kTicketBits;
      if (s_tile == tiles + gridDim.x - 1) {
        atomicExch(&header->epoch_ticket, ((s_epoch + 1) & kEpochMask) << kTicketBits);
      }
      if (s_tile < tiles) ahead = atomicAdd(&header->epoch_ticket, 1ull);
    }
    __syncthreads();
    drawn = s_tile;
    return drawn;
  };
  uint32_t t0 = tiles, t1 = tiles;
  if (indexed) {
    t0 = blockIdx.x < tiles ? blockIdx.x : tiles;
    if (t0 < tiles) IssueTileLoad(in, t0, ps.items[0], vec);
    __pipeline_commit();
    if (tid == 0) {
      uint32_t ticket = 0;
      unsigned long long epoch = 0;
      DrawTicket(header, gridDim.x, ticket, epoch);  // the grid's last draw starts the next epoch
      s_epoch = epoch;
    }
    __syncthreads();
    drawn = tiles;  // no more draws
  } else {
    t0 = draw();
    if (t0 < tiles) IssueTileLoad(in, t0, ps.items[0], vec);
    __pipeline_commit();
  }
  w.epoch = s_epoch;
  if (!indexed) t1 = t0 < tiles ? draw() : tiles;
  if (t1 < tiles) IssueTileLoad(in, t1, ps.items[1], vec);
  __pipeline_commit();

  // Phase 1 of tile u (its elements in items): Q, A out, Q[tid-1].
  auto phase1 = [&](uint32_t u, const In* items, T& q, T& q_prev) {
    T x[kItems];
    ReadSegmentAs(items, x);
    q = BlockHillisSteele<T, Op>(SegmentFold<T, Op>(x), ps.hs);
    if (tid == kThreads - 1) PublishTile(w.aggs, u, w.epoch, kFlagInclusive, q);  // A = Q[255]
    // Q[tid-1]: the lane before's; lane 0 computes the last level's node itself from hs[1],
    // which still holds that level's inputs (no barrier).
    q_prev = ShflUp(q, 1);
    if (LaneId() == 0 && tid > 0) {
      const int p = tid - 1;
      q_prev = p >= kThreads / 2 ? op(ps.hs[1][p - kThreads / 2], ps.hs[1][p]) : ps.hs[1][p];
    }
  };
  // T_b now, when tile u (A = q in thread 255) ends super b: the block waits for the super's
  // other aggregates.
  auto total_now = [&](uint32_t u, T q) {
    const uint64_t pos = static_cast<uint64_t>(w.j0) + u;
    if (pos % kThreads != kThreads - 1) return;
    const auto b = static_cast<uint32_t>(pos / kThreads);
    ps.hs[0][tid] = tid < kThreads - 1 ? w.Aggregate(b, tid) : q;  // hs[0]'s readers passed a barrier
    __syncthreads();
    if (tid < kWarpThreads) {
      const T total = WarpConeHillisSteele<T, Op>(ps.hs[0], kThreads - 1);
      if (tid == 0) PublishTile(w.totals, b, w.epoch, kFlagInclusive, total);
    }
    __syncthreads();  // hs[0] is free again
  };

  int buf = 0;  // t0's items; t1's are buf + 1, the next-but-one's buf + 2 (mod 3)
  uint32_t finished = 0;
  T q0{}, q0_prev{};
  __pipeline_wait_prior(1);  // t0's copies (this thread's)
  __syncthreads();           // ... everyone's
  if (t0 < tiles) {
    phase1(t0, ps.items[0], q0, q0_prev);
    // The block's first tile has no carry wait yet to share the total's wait with (and in its
    // phase 2 the total would come an iteration late for the next super's tiles).
    total_now(t0, q0);
  }
  while (t0 < tiles) {
    uint32_t t2 = tiles;
    if constexpr (kStages == 3) {
      t2 = drawn < tiles ? draw() : tiles;  // the barriers: the last tile's store is done
      if (t2 < tiles) IssueTileLoad(in, t2, ps.items[(buf + 2) % kStages], vec);
      __pipeline_commit();
    }
    if constexpr (kStages == 3) {
      __pipeline_wait_prior(1);  // t1's copies
    } else {
      __pipeline_wait_prior(0);
    }
    __syncthreads();
    T q1{}, q1_prev{};
    if (t1 < tiles) {
      phase1(t1, ps.items[(buf + 1) % kStages], q1, q1_prev);
      if constexpr (!kTotalBesideCarry<kStages>) total_now(t1, q1);
    }

    // Phase 2 of t0. Its predecessors' aggregates went out an iteration ago. The last thread
    // fetches the carry C_b while the first j fetch the aggregates, so the block waits for one
    // round trip, not two in a row (s_carry's last readers passed this iteration's barriers).
    const uint64_t pos = static_cast<uint64_t>(w.j0) + t0;
    const auto b = static_cast<uint32_t>(pos / kThreads);
    const int j = static_cast<int>(pos % kThreads);
    const In* items = ps.items[buf];
    // T_b of the super that t1 ends is computed here (three tiles a block), an iteration before
    // t1's phase 2, while the block waits for t0's carry anyway: the two waits overlap.
    const uint64_t pos1 = static_cast<uint64_t>(w.j0) + t1;
    const auto b1 = static_cast<uint32_t>(pos1 / kThreads);
    const bool total1 = kTotalBesideCarry<kStages> && t1 < tiles && pos1 % kThreads == kThreads - 1;
    if (tid == kThreads - 1) {  // never one of the j < 256 below
      if (total1) ps.totals_in[kThreads - 1] = q1;  // t1's A = Q[255] (its readers passed a barrier)
      int has = 0;
      s_carry = w.template Carry<Op>(b, has, j == 0);
      s_flag = has;
    } else if constexpr (!kTotalBesideCarry<kStages>) {
      // P[j-1] of the Hillis-Steele over A of positions 0..j-1 of the super (hs[0]'s readers
      // passed a barrier)
      if (tid < j) ps.hs[0][tid] = w.Aggregate(b, tid);
    } else {
      // The aggregates for P[j-1] (positions 0..j-1 of the super) and those of t1's super,
      // polled together so that neither waits behind the other (hs[0]'s and totals_in's readers
      // passed a barrier).
      T ap{}, at{};
      const TileWord* wp = tid < j ? w.AggregateWord(b, tid, ap) : nullptr;
      const TileWord* wt = total1 ? w.AggregateWord(b1, tid, at) : nullptr;
      WaitInclusivePair(wp, ap, wt, at, w.epoch);
      if (tid < j) ps.hs[0][tid] = ap;
      if (total1) ps.totals_in[tid] = at;
    }
    if (j > 0 || total1) {
      __syncthreads();
      if (j > 0 && WarpId() == 0) {
        const T pv = WarpConeHillisSteele<T, Op>(ps.hs[0], j - 1);
        if (tid == 0) s_p = pv;
      }
      if (total1 && WarpId() == 1) {
        const T total = WarpConeHillisSteele<T, Op>(ps.totals_in, kThreads - 1);
        if (LaneId() == 0) PublishTile(w.totals, b1, w.epoch, kFlagInclusive, total);
      }
    }
    __syncthreads();
    // TP = C ⊕ P[j-1], then the segment's SP = TP ⊕ Q[k-1], exactly as canon::ScanTileQ.
    bool has = s_flag != 0;
    T sp = s_carry;
    if (j > 0) {
      sp = has ? op(sp, s_p) : s_p;
      has = true;
    }
    if (tid > 0) {
      sp = has ? op(sp, q0_prev) : q0_prev;
      has = true;
    }
    T x[kItems];
    ReadSegmentAs(items, x);
    T y[kItems];
    if (exclusive) {
      T v = has ? sp : Op::identity();
      y[0] = v;
#pragma unroll
      for (int i = 1; i < kItems; ++i) {
        v = (has || i > 1) ? op(v, x[i - 1]) : x[i - 1];
        y[i] = v;
      }
    } else {
      T v = has ? op(sp, x[0]) : x[0];
      y[0] = v;
#pragma unroll
      for (int i = 1; i < kItems; ++i) {
        v = op(v, x[i]);
        y[i] = v;
      }
    }
    T* slots = OutSlots(ps, buf);
    WriteSegment(slots, y);  // this thread's own slots
    __syncthreads();
    StoreTile(slots, out + static_cast<uint64_t>(t0) * kTile, vec);
    ++finished;
    if constexpr (kStages == 2) {  // t0's buffer is free once draw's first barrier is passed
      t2 = drawn < tiles ? draw() : tiles;
      if (t2 < tiles) IssueTileLoad(in, t2, ps.items[buf], vec);
      __pipeline_commit();
    }
    t0 = t1;
    t1 = t2;
    q0 = q1;
    q0_prev = q1_prev;
    buf = (buf + 1) % kStages;
  }

  // The block's tiles are counted once, at its end (a count a tile put a global round trip on
  // every tile's path). The last block to finish leaves the state as the two-pass CarryKernel
  // does: every tile has read the state by then.
  if (finished == 0) return;
  __syncthreads();  // every thread's reads of the state and stores are done
  if (tid == 0) {
    __threadfence();
    s_last = atomicAdd(&header->done, finished) + finished == tiles;
    if (s_last) header->done = 0;  // as the reductions leave it
  }
  __syncthreads();
  if (!s_last) return;
  __threadfence();
  const uint64_t end = static_cast<uint64_t>(w.j0) + tiles;
  const auto last_super = static_cast<uint32_t>((end - 1) / kThreads);
  const bool last_complete = end % kThreads == 0;
  if (tid == 0 && (last_complete || last_super > 0 || w.fresh)) {  // else the state's carry stands
    int has_carry = 0;
    const T c = w.template Carry<Op>(last_complete ? last_super + 1 : last_super, has_carry, true);
    w.state->carry = c;
    w.state->has_carry = has_carry;
  }
  if (!last_complete) {  // keep the raw aggregates of the super the call ends in
    const uint64_t p = static_cast<uint64_t>(last_super) * kThreads + tid;
    if (p >= static_cast<uint64_t>(w.j0) && p < end) {
      w.state->aggs[tid] = WaitInclusive<T>(w.aggs, static_cast<uint32_t>(p - w.j0), w.epoch);
    }
  }
}

inline std::size_t Round16(std::size_t b) { return (b + 15) & ~std::size_t{15}; }

// Reductions (no output): the aggregates, the supers' totals and the carries, three small
// kernels after one read of the input.
template <class T>
struct Layout {
  std::size_t aggs, totals, bytes;
  Layout(uint64_t tiles, uint64_t supers) {
    aggs = 0;
    totals = Round16(tiles * sizeof(T));
    bytes = totals + Round16(supers * sizeof(T));
  }
};

// Scans: OnePassKernel's tile words of one launch: A per tile, T_b per super (b from 0), C_b
// (b from 1; the last launch's state update may ask for one past the last super).
inline uint64_t OnePassSupers(uint64_t launch_tiles) { return DivUp(launch_tiles, kThreads) + 2; }
inline std::size_t OnePassBytes(uint64_t launch_tiles) {
  return (launch_tiles + 2 * OnePassSupers(launch_tiles)) * sizeof(TileWord);
}

// kStages: tiles a persistent block keeps (tuning.cuh's choice unless a tuning run asks for another).
template <class T, class Op, int kStages = CanonicalTuning<kTunedArch, sizeof(T)>::kStages>
cudaError_t CanonicalScanImpl(void* d_temp, std::size_t& temp_bytes, const T* in, T* out, uint64_t tiles,
                              uint64_t first_tile, bool exclusive, CanonicalState<T>* state,
                              cudaStream_t stream) {
  // Persistent blocks draw one ticket past the tiles each (OnePassKernel): keep room.
  const uint64_t launch_tiles = std::min<uint64_t>(std::max<uint64_t>(tiles, 1),
                                                   std::min<uint64_t>(MaxTilesPerLaunch(), kMaxTilesPerLaunch - 65536));
  const Layout<T> layout(tiles, DivUp(tiles, kThreads) + 1);
  const std::size_t body = std::max(layout.bytes, OnePassBytes(launch_tiles));
  if (d_temp == nullptr) {
    temp_bytes = TempBytesFor(body);
    return cudaSuccess;
  }
  if (tiles == 0) return cudaSuccess;
  if (in == nullptr || state == nullptr) return cudaErrorInvalidValue;
  if (tiles > 0x7fffffffu) return cudaErrorInvalidValue;
  TempView view;
  GPUSCAN_TRY(ViewTemp(d_temp, temp_bytes, body, view));
  if (out != nullptr) {
    // Launches of at most MaxTilesPerLaunch() tiles (the ticket's width, less the persistent
    // blocks' extra draws), each continuing the state the one before left, on as many blocks
    // as fit the device at once. Tile words need no clearing.
    constexpr auto kernel = OnePassKernel<T, Op, kStages>;
    constexpr int smem = sizeof(OnePassSmem<T, kStages>);
    uint64_t resident = 0;
    GPUSCAN_TRY(ResidentBlocks<kernel>(kThreads, smem, resident));
    if (MaxPersistentBlocks() != 0) resident = std::min<uint64_t>(resident, MaxPersistentBlocks());
    auto* words = reinterpret_cast<TileWord*>(view.body);
    for (uint64_t done = 0; done < tiles; done += launch_tiles) {
      const auto launch = static_cast<uint32_t>(std::min(launch_tiles, tiles - done));
      const auto grid = static_cast<uint32_t>(std::min<uint64_t>(launch, resident));
      OnePassWords<T> w{};
      w.aggs = words;
      w.totals = words + launch;
      w.carries = w.totals + OnePassSupers(launch);
      w.tiles = launch;
      w.j0 = static_cast<int>((first_tile + done) % kThreads);
      w.fresh = first_tile + done == 0;
      w.walk_only = CanonicalCarryWalk();
      w.state = state;
      kernel<<<grid, kThreads, smem, stream>>>(in + done * kTile, out + done * kTile, exclusive, view.header, w);
      GPUSCAN_CHECK_LAUNCH();
    }
    return cudaSuccess;
  }
  const int j0 = static_cast<int>(first_tile % kThreads);
  const auto grid = static_cast<unsigned>(tiles);
  T* aggs = reinterpret_cast<T*>(view.body + layout.aggs);
  T* totals = reinterpret_cast<T*>(view.body + layout.totals);
  const auto supers = static_cast<uint32_t>(DivUp(j0 + tiles, kThreads));
  TileAggKernel<T, Op><<<grid, kThreads, 0, stream>>>(in, aggs);
  GPUSCAN_CHECK_LAUNCH();
  SuperKernel<T, Op><<<supers, kThreads, 0, stream>>>(aggs, tiles, j0, state, totals);
  GPUSCAN_CHECK_LAUNCH();
  CarryKernel<T, Op><<<1, kThreads, 0, stream>>>(aggs, tiles, j0, supers, totals, state, first_tile == 0);
  GPUSCAN_CHECK_LAUNCH();
  // The temp-storage contract: leave the body as zero as it came.
  return cudaMemsetAsync(view.body, 0, layout.bytes, stream);
}

}  // namespace gpuscan::kernels::detail::canonical

namespace gpuscan::kernels {

template <class T, class Op>
cudaError_t CanonicalScan(void* d_temp, std::size_t& temp_bytes, const T* d_in, T* d_out, uint64_t tiles,
                          uint64_t first_tile, bool exclusive, CanonicalState<T>* d_state, cudaStream_t stream) {
  return detail::canonical::CanonicalScanImpl<T, Op>(d_temp, temp_bytes, d_in, d_out, tiles, first_tile, exclusive,
                                                     d_state, stream);
}

}  // namespace gpuscan::kernels

#define GPUSCAN_INSTANTIATE_CANONICAL(T, OP)                                                     \
  template cudaError_t gpuscan::kernels::CanonicalScan<T, gpuscan::ops::OP<T>>(                  \
      void*, std::size_t&, const T*, T*, uint64_t, uint64_t, bool, gpuscan::kernels::CanonicalState<T>*, \
      cudaStream_t);
