// The one-pass canonical scan's tile words (agent_canonical.cuh): where a launch's aggregates,
// super totals and carries live, and how a block reads them and folds a carry.
//
// Aggregates, totals and carries travel as tile words (tile_state.cuh), published inclusive and
// read with WaitInclusive: {status, value} written and read whole, tagged with the launch's
// epoch, so the temp storage may hold any earlier single-pass launch's words (the temp
// contract) and nothing needs clearing.
#pragma once

#include "canonical_tile.cuh"
#include "gpuscan/kernels/canonical_scan.h"
#include "tile_state.cuh"

namespace gpuscan::kernels::detail::canonical {

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

// Scans: OnePassKernel's tile words of one launch: A per tile, T_b per super (b from 0), C_b
// (b from 1; the last launch's state update may ask for one past the last super).
inline uint64_t OnePassSupers(uint64_t launch_tiles) { return DivUp(launch_tiles, kThreads) + 2; }
inline std::size_t OnePassBytes(uint64_t launch_tiles) {
  return (launch_tiles + 2 * OnePassSupers(launch_tiles)) * sizeof(TileWord);
}

}  // namespace gpuscan::kernels::detail::canonical
