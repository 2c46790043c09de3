// The canonical float tree's one-pass scan on the device (gpuscan/kernels/canonical_tree.h):
// OnePassKernel computes the same operations on the same operands as the host functions there
// and as the reduction's kernels (agent_canonical_reduce.cuh), reading the input once.
#pragma once

#include <cuda_pipeline.h>

#include <type_traits>

#include "canonical_block_tree.cuh"
#include "canonical_tile.cuh"
#include "canonical_words.cuh"
#include "tile_state.cuh"
#include "tuning.cuh"

namespace gpuscan::kernels::detail::canonical {

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

}  // namespace gpuscan::kernels::detail::canonical
