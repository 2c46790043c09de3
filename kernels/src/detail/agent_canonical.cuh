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

#include <algorithm>

#include "common.cuh"
#include "gpuscan/kernels/canonical_scan.h"
#include "tile_state.cuh"

namespace gpuscan::kernels::detail::canonical {

constexpr int kThreads = 256;  // = segments per tile = tiles per super
constexpr int kItems = 16;     // = items per segment
constexpr int kTile = kThreads * kItems;
constexpr int kPadded = kTile + kTile / 32;

// One padding word per 32 keeps a thread's 16 consecutive items off each other's banks.
__device__ __forceinline__ int Pad(int i) { return i + (i >> 5); }

template <class T>
struct TileSmem {
  T items[kPadded];
  T hs[2][kThreads];
};

// Striped (coalesced) loads, then each thread takes its segment's 16 consecutive items.
template <class T>
__device__ __forceinline__ void LoadSegment(const T* in, T (&x)[kItems], TileSmem<T>& sm) {
  const int tid = threadIdx.x;
#pragma unroll
  for (int r = 0; r < kItems; ++r) sm.items[Pad(r * kThreads + tid)] = in[r * kThreads + tid];
  __syncthreads();
#pragma unroll
  for (int i = 0; i < kItems; ++i) x[i] = sm.items[Pad(tid * kItems + i)];
}

// The inverse: each thread's 16 results, stored striped. sm.items must be free (a barrier
// since the last LoadSegment read).
template <class T>
__device__ __forceinline__ void StoreSegment(T* out, const T (&y)[kItems], TileSmem<T>& sm) {
  const int tid = threadIdx.x;
#pragma unroll
  for (int i = 0; i < kItems; ++i) sm.items[Pad(tid * kItems + i)] = y[i];
  __syncthreads();
#pragma unroll
  for (int r = 0; r < kItems; ++r) out[r * kThreads + tid] = sm.items[Pad(r * kThreads + tid)];
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
__device__ __forceinline__ T BlockHillisSteele(T v, TileSmem<T>& sm) {
  const Op op;
  const int tid = threadIdx.x;
  int buf = 0;
#pragma unroll
  for (int d = 1; d < kThreads; d <<= 1, buf ^= 1) {
    sm.hs[buf][tid] = v;
    __syncthreads();
    if (tid >= d) v = op(sm.hs[buf][tid - d], v);
  }
  return v;
}

// The value of thread tid - 1 (undefined for thread 0), through buffer 0 (free after 8 levels).
template <class T>
__device__ __forceinline__ T FromPrevious(T v, TileSmem<T>& sm) {
  const int tid = threadIdx.x;
  sm.hs[0][tid] = v;
  __syncthreads();
  return tid > 0 ? sm.hs[0][tid - 1] : v;
}

template <class T, class Op>
__global__ void __launch_bounds__(kThreads) TileAggKernel(const T* in, T* aggs) {
  __shared__ TileSmem<T> sm;
  T x[kItems];
  LoadSegment(in + static_cast<uint64_t>(blockIdx.x) * kTile, x, sm);
  const T q = BlockHillisSteele<T, Op>(SegmentFold<T, Op>(x), sm);
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
  const T pv = BlockHillisSteele<T, Op>(a, sm);
  if (tid == kThreads - 1 && p < end) totals[blockIdx.x] = pv;
}

// supers: blocks of SuperKernel; the last one is complete iff (j0 + tiles) % 256 == 0.
template <class T, class Op>
__global__ void __launch_bounds__(kThreads)
    CarryKernel(const T* aggs, uint64_t tiles, int j0, uint32_t supers, const T* totals, CanonicalState<T>* state) {
  const Op op;
  const uint64_t end = j0 + tiles;
  const bool last_complete = end % kThreads == 0;
  if (threadIdx.x == 0) {
    T c = state->carry;
    int32_t has = state->has_carry;
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
//   - A tile publishes its aggregate A as soon as it has it.
//   - Tile j of a super waits for the aggregates of tiles 0..j-1 of its super and computes
//     P[j-1] itself (Hillis-Steele over them: y[j-1] depends on y[0..j-1] only).
//   - The carry into super b (b > 0) is published by tile 255 of super b-1, which waits for the
//     carry into its own super: a chain with one hop per 2^20 elements.
// Tiles are numbered by a ticket drawn at the start, so a tile waits only for tiles that have
// started: no deadlock whatever order the hardware schedules blocks in.

// Aggregates and carries travel as tile words (tile_state.cuh), published inclusive and read
// with WaitInclusive: {status, value} written and read whole, tagged with the launch's epoch,
// so the temp storage may hold any earlier single-pass launch's words (the temp contract) and
// nothing needs clearing.

template <class T, class Op>
__global__ void __launch_bounds__(kThreads)
    OnePassKernel(const T* in, T* out, uint32_t tiles, int j0, bool exclusive, CanonicalState<T>* state,
                  TempHeader* header, TileWord* aggs, TileWord* carries) {
  static_assert(sizeof(T) <= 8, "a tile word carries up to 8 value bytes");
  __shared__ TileSmem<T> sm;
  __shared__ uint32_t s_tile;
  __shared__ unsigned long long s_epoch;
  __shared__ int s_flag;
  __shared__ T s_carry;  // C_b, when s_flag
  __shared__ T s_p;      // P[j-1], when j > 0
  __shared__ int s_last;
  const Op op;
  const int tid = threadIdx.x;
  if (tid == 0) DrawTicket(header, tiles, s_tile, s_epoch);
  __syncthreads();
  const uint32_t t = s_tile;
  const unsigned long long epoch = s_epoch;
  const uint64_t offset = static_cast<uint64_t>(t) * kTile;
  T x[kItems];
  LoadSegment(in + offset, x, sm);
  const T q = BlockHillisSteele<T, Op>(SegmentFold<T, Op>(x), sm);  // Q[tid]
  if (tid == kThreads - 1) PublishTile(aggs, t, epoch, kFlagInclusive, q);  // A = Q[255]
  const T q_prev = FromPrevious(q, sm);
  const uint64_t pos = static_cast<uint64_t>(j0) + t;
  const uint32_t b = static_cast<uint32_t>(pos / kThreads);
  const int j = static_cast<int>(pos % kThreads);
  // P[j-1] (and, for the super's last tile, P[255]): Hillis-Steele over A of tiles 0..j of the
  // super, thread i waiting for tile i's. Positions before j0 in the call's first super are
  // the state's.
  T pv{};
  if (j > 0) {
    T a = Op::identity();  // past j: never read by position j-1 or j
    if (tid < j) {
      a = b == 0 && tid < j0 ? state->aggs[tid]
                             : WaitInclusive<T>(aggs, b * kThreads + tid - j0, epoch);
    } else if (tid == j) {
      a = q;  // only thread 255 holds A, and only tile j = 255 reads position j
    }
    __syncthreads();  // FromPrevious's readers are done with sm.hs[0]
    pv = BlockHillisSteele<T, Op>(a, sm);
    if (tid == j - 1) s_p = pv;
  }
  // The carry C_b; the super's last tile publishes C_{b+1} = C_b op P[255].
  if (tid == kThreads - 1) {
    T c{};
    int has = 0;
    if (b == 0) {
      c = state->carry;
      has = state->has_carry;
    } else {
      c = WaitInclusive<T>(carries, b, epoch);
      has = 1;
    }
    if (j == kThreads - 1) PublishTile(carries, b + 1, epoch, kFlagInclusive, has ? op(c, pv) : pv);
    s_carry = c;
    s_flag = has;
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
    sp = has ? op(sp, q_prev) : q_prev;
    has = true;
  }
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
  StoreSegment(out + offset, y, sm);  // sm.items: LoadSegment's reads were barriers ago
  // The last tile to finish leaves the state as the two-pass CarryKernel does: every tile has
  // read the state by then (before the barrier above).
  if (tid == 0) {
    __threadfence();
    s_last = atomicAdd(&header->done, 1u) == tiles - 1;
    if (s_last) header->done = 0;  // as the reductions leave it
  }
  __syncthreads();
  if (!s_last) return;
  __threadfence();
  const uint64_t end = static_cast<uint64_t>(j0) + tiles;
  const uint32_t last_super = static_cast<uint32_t>((end - 1) / kThreads);
  const bool last_complete = end % kThreads == 0;
  if (tid == 0) {
    if (last_complete) {
      state->carry = WaitInclusive<T>(carries, last_super + 1, epoch);
      state->has_carry = 1;
    } else if (last_super > 0) {
      state->carry = WaitInclusive<T>(carries, last_super, epoch);
      state->has_carry = 1;
    }  // else: the call's first super, whose carry is the state's already
  }
  if (!last_complete) {  // keep the raw aggregates of the super the call ends in
    const uint64_t p = static_cast<uint64_t>(last_super) * kThreads + tid;
    if (p >= static_cast<uint64_t>(j0) && p < end) {
      state->aggs[tid] = WaitInclusive<T>(aggs, static_cast<uint32_t>(p - j0), epoch);
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

// Scans: OnePassKernel's tile words, per tile and per super of one launch (carries[b] for b in
// 1..supers).
inline std::size_t OnePassBytes(uint64_t launch_tiles) {
  return (launch_tiles + DivUp(launch_tiles, kThreads) + 2) * sizeof(TileWord);
}

template <class T, class Op>
cudaError_t CanonicalScanImpl(void* d_temp, std::size_t& temp_bytes, const T* in, T* out, uint64_t tiles,
                              uint64_t first_tile, bool exclusive, CanonicalState<T>* state,
                              cudaStream_t stream) {
  const uint64_t launch_tiles = std::min<uint64_t>(std::max<uint64_t>(tiles, 1), MaxTilesPerLaunch());
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
    // Launches of at most MaxTilesPerLaunch() tiles (the ticket's width), each continuing the
    // state the one before left. Tile words need no clearing.
    auto* aggs = reinterpret_cast<TileWord*>(view.body);
    for (uint64_t done = 0; done < tiles; done += launch_tiles) {
      const auto grid = static_cast<uint32_t>(std::min(launch_tiles, tiles - done));
      const int j0 = static_cast<int>((first_tile + done) % kThreads);
      OnePassKernel<T, Op><<<grid, kThreads, 0, stream>>>(in + done * kTile, out + done * kTile, grid, j0, exclusive,
                                                          state, view.header, aggs, aggs + grid);
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
  CarryKernel<T, Op><<<1, kThreads, 0, stream>>>(aggs, tiles, j0, supers, totals, state);
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
