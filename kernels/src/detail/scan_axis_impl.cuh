// Scans along one axis of a row-major matrix (gpuscan/kernels/scan_axis.h, issue 47).
//
// Three ways of walking the matrix. In the first two (AxisKernel) a block moves tiles of R rows
// x C columns through shared memory: a ring of kStages buffers, the next kStages - 1 tiles
// copying in (cp.async, 16 bytes an access where cols and the pointers allow it, else one
// element) while one is folded in place and stored out coalesced; the third (LookKernel) holds
// its tile in registers. DRAM traffic is one read and one write of the matrix (plus, for the
// look-back, a few values a column a band: aggregates, inclusive values, the ones walked).
//
//   kRows   (ScanRows): a thread per row, R = 32 rows a block, tiles of 256 bytes of each row
//           walked left to right with the row's fold in a register. No block talks to another.
//           Row groups are dealt to the blocks statically (group blockIdx.x + i * gridDim.x);
//           32 rows a block keeps a 2^14-row matrix at 512 groups, all resident at once (a
//           DRAM-bound grid whose blocks all have equal work ends together), and a 2^20-row one
//           at ~40 groups a block. Shared rows are padded by one vector (a quarter-warp's 16-byte
//           reads of 8 rows then cover the 32 banks once).
//   kStrip  (ScanColumns, wide matrices and strict float folds): a thread per column, a block
//           owns a strip of C columns (256 bytes) and walks it top to bottom, the column folds in
//           registers: again no communication, and every column is folded strictly in order.
//   kLook   (ScanColumns of integers and MIN/MAX when the 256-byte strips are fewer than the SMs,
//           e.g. 2^20 x 256): its own kernel, LookKernel. A tile is one band of G x R rows by cw
//           columns (cw the power of two >= cols, 32..256; G = 256 / cw row groups; R = 64 rows of
//           4-byte types, 32 of 8-byte ones), 256 threads, a thread a column and R rows of it held
//           in registers (loads and stores of 128 bytes a warp, no shared-memory ring). Tiles come
//           by ticket (an atomic counter, drawn only when the block is free to start the tile, so
//           a predecessor never waits in another block's queue), band-major. Per tile one status
//           word (flags[ctile][band]: 0, 1 aggregate, 2 inclusive); per column its aggregate
//           agg[band][col] and inclusive value inc[band][col], stored before the flag (block
//           barrier, then one thread's gpu-scope fence and flag store). A tile whose band above
//           is already inclusive (one acquire load, overlapped with its rows' loads) takes that
//           value; else it publishes its aggregate and warp 0 looks back CUB's way, 32 flags (one
//           128-byte line) a round, nearest first, to the nearest inclusive band with every band
//           between published; the block then folds those values, each column its own, and the
//           tile publishes its inclusive value before it scans its rows and stores them. Exact
//           only because these operators are associative in every order (integers wrap, MIN/MAX
//           pick; the identity starts band 0 without a carry); float SUM/PRODUCT never take it.
//           No deadlock: a tile waits only for lower tickets of running blocks. Temp: the flags
//           (zeroed each call) and two bands x cols arrays of values, not zeroed (32 MiB for
//           2^20 x 256 int32).
//
// Measured (H100, 2^28 int32, bench/results/scan-axis-h100-2026-11-27): rows 93.4% of copy at
// 2^20 x 256 and 92.2% at 2^14 x 2^14; strips 93.2% at 2^14 x 2^14; look-back 65.4% at 2^20 x 256
// (was 52% with one word a column and a copy ring; short of its 85% target). What limits it: a
// tile's walk is as long as the tiles that sit between "aggregate out" and "inclusive out" (rows
// a microsecond x that latency / R, ~50 bands at R = 64) and every band walked costs a value a
// column, cols x 4 bytes, against R x cols x 4 bytes of tile: the overhead falls as 1/R^2.
// Tried: R = 32 (32 KiB tiles, 4 blocks a SM) 27%; R = 64 (2 blocks a SM) 66%; a carry agent (the
// first ticket of each column tile folds all aggregates in order into a per-band prefix, tiles
// wait for its progress counter; no walks) 45%: each tile then waits through four dependent L2
// round trips and two fences with nothing else in flight on its block. What should work next:
// taller look-back units (R >= 128) with the next tile's loads in flight during the look-back
// (shared-memory staging beside the registers). Float SUM/PRODUCT at 2^20 x 256 run the narrow
// strips: 16 blocks, a strict chain of 2^20 dependent adds each (~2.1 ms at 1.98 GHz at best),
// 7.4 ms measured.
//
// Why not one kernel of square tiles both ways (as scan2d): an axis scan needs only one of the
// two folds, and a strip or row group that a block owns end to end needs no hand-off at all;
// look-back is there only for the one case that lacks parallelism across the matrix, few
// columns.
//
// Polls are bounded (~2^23 tries): a flag that never comes ends in a message and a trap instead
// of a hung stream.
#pragma once

#include <cuda_pipeline.h>
#include <cuda_runtime.h>

#include <cstdio>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "gpuscan/kernels/operators.h"
#include "gpuscan/kernels/scan_axis.h"
#include "device_facts.cuh"
#include "tile_state.cuh"

namespace gpuscan::kernels::axis_detail {

using detail::TileWord;

enum class Walk { kRows, kStrip };

// R rows x C columns a tile, V elements an access (1: element by element), kStages buffers.
// kMinThreads: more threads than rows (columns) to copy the tiles in and out (narrow strips).
template <Walk kWalk, class T, int R, int C, int V, int kStages, int kMinThreads = 0>
struct Shape {
  static constexpr Walk kMode = kWalk;
  static constexpr int kR = R, kC = C, kV = V, kS = kStages;
  // A thread a row / a column folds; every thread copies.
  static constexpr int kThreads = std::max(kWalk == Walk::kRows ? R : C, kMinThreads);
  // Rows mode: padded rows (bank conflicts of the row walk); columns: consecutive threads read
  // consecutive words, no padding needed.
  static constexpr int kWidth = kWalk == Walk::kRows ? C + V : C;
  static constexpr std::size_t kTileBytes = std::size_t(R) * kWidth * sizeof(T);
  static constexpr std::size_t kSmem = kStages * kTileBytes;
  static_assert(C % V == 0 && (kWidth * sizeof(T)) % (V * sizeof(T)) == 0, "rows of whole vectors");
};

template <class T, int V>
struct alignas(sizeof(T) * V) Vec {
  T e[V];
};

// ---- The look-back walk (ScanColumns of exact operators with few columns) ----------------------
// A tile is one band of G x R rows by `cw` columns (cw a power of two, 32..256; G = 256 / cw), a
// thread a column and R rows of it, held in registers. Tiles come by ticket in band-major order.
// Per tile: one status word (flags[ctile][band]: 0 none, 1 aggregate, 2 inclusive) and, per
// column, its aggregate agg[band][col] and inclusive value inc[band][col], written before the
// flag (block barrier, then one thread's gpu-scope fence and flag store) and read after it.
enum : unsigned { kNone = 0, kAggregate = 1, kInclusive = 2 };
constexpr int kLookThreads = 256;

__device__ __forceinline__ unsigned LoadAcquire(const unsigned* p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void StoreRelaxed(unsigned* p, unsigned v) {
  asm volatile("st.relaxed.gpu.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
// A published value (another block's, after the flag was acquired): from L2, never a stale L1.
template <class T>
__device__ __forceinline__ T LoadValue(const T* p) {
  if constexpr (sizeof(T) == 4) {
    unsigned v;
    asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return detail::FromBits<T>(v);
  } else {
    unsigned long long v;
    asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return detail::FromBits<T>(v);
  }
}

constexpr uint32_t kMaxSpins = 1u << 23;
static __device__ __noinline__ void GiveUp(uint64_t band, uint64_t ctile, uint64_t waiting_for) {
  printf("gpuscan scan_axis: band %llu column tile %llu (block %u): the flag of band %llu never came\n",
         static_cast<unsigned long long>(band), static_cast<unsigned long long>(ctile), blockIdx.x,
         static_cast<unsigned long long>(waiting_for));
  __trap();
}

// Warp 0, all lanes: the nearest band above `band` whose flag is inclusive, once every band
// between has at least its aggregate. A round reads 32 flags (one 128-byte line), nearest first;
// leading aggregates are passed over and the window moves up past them.
__device__ __forceinline__ uint32_t FindInclusive(const unsigned* flags, uint32_t band, uint32_t ctile) {
  const int lane = threadIdx.x & 31;
  int64_t end = band;  // bands [.., end) not yet passed over
  for (uint32_t spins = 0;; ++spins) {
    const int64_t p = end - 1 - lane;
    // Band 0 is always published inclusive, so lanes above it are never needed.
    const unsigned f = p >= 0 ? LoadAcquire(flags + p) : kInclusive;
    const unsigned valid = __ballot_sync(~0u, f != kNone);
    const unsigned incl = __ballot_sync(~0u, f == kInclusive);
    const int lead = valid == ~0u ? 32 : __ffs(~valid) - 1;  // leading published bands
    if (incl) {
      const int j = __ffs(incl) - 1;
      if (j < lead) return static_cast<uint32_t>(end - 1 - j);
    }
    end -= lead;
    if (lead == 0) {
      if (spins >= 2) __nanosleep(100);
      if (spins >= kMaxSpins) GiveUp(band, ctile, uint64_t(end - 1));
    }
  }
}

template <class T, class Op, int R>
__global__ void __launch_bounds__(kLookThreads, R * sizeof(T) <= 128 ? 4 : 2)
    LookKernel(const T* in, T* out, uint64_t rows, uint64_t cols, bool exclusive, const T* carry_in, T* carry_out,
               unsigned* flags, T* agg, T* inc, unsigned long long* counter, int cw_log2, uint32_t bands,
               uint32_t ctiles) {
  const int tid = threadIdx.x;
  const int cw = 1 << cw_log2, G = kLookThreads >> cw_log2;
  const int c = tid & (cw - 1), g = tid >> cw_log2;
  const bool lead = g == 0;  // the column's thread that looks back and publishes
  const Op op;
  __shared__ unsigned long long s_ticket;
  __shared__ unsigned s_flag, s_from;
  __shared__ T s_part[kLookThreads];  // each thread's fold of its R rows, [g][c]
  __shared__ T s_prefix[kLookThreads];
  const uint64_t tiles = uint64_t(bands) * ctiles, band_rows = uint64_t(G) * R;
  for (;;) {
    if (tid == 0) s_ticket = atomicAdd(counter, 1ull);
    __syncthreads();
    const unsigned long long t = s_ticket;
    if (t >= tiles) break;
    const auto band = static_cast<uint32_t>(t / ctiles), ctile = static_cast<uint32_t>(t % ctiles);
    const uint64_t col = (uint64_t(ctile) << cw_log2) + c;
    const bool col_ok = col < cols;
    const uint64_t row0 = uint64_t(band) * band_rows + uint64_t(g) * R;
    const T* src = in + row0 * cols + col;
    T v[R];
    if (col_ok && row0 + R <= rows) {
#pragma unroll
      for (int i = 0; i < R; ++i) v[i] = src[i * cols];
    } else {
#pragma unroll
      for (int i = 0; i < R; ++i) v[i] = col_ok && row0 + i < rows ? src[i * cols] : Op::identity();
    }
    // The peek at the band above goes out while the rows come in.
    unsigned* my_flags = flags + uint64_t(ctile) * bands;
    if (tid == 0) s_flag = band == 0 ? kInclusive : LoadAcquire(my_flags + band - 1);
    T part = v[0];
#pragma unroll
    for (int i = 1; i < R; ++i) part = op(part, v[i]);
    s_part[tid] = part;
    __syncthreads();
    T total = part;  // the tile's aggregate of column c (lead threads)
    if (lead) {
      for (int k = 1; k < G; ++k) total = op(total, s_part[k * cw + c]);
    }
    T prefix = Op::identity();
    if (band == 0) {
      if (lead && carry_in && col_ok) prefix = carry_in[col];
    } else if (s_flag == kInclusive) {  // the band above is done: the chained hand-off
      if (lead && col_ok) prefix = LoadValue(inc + uint64_t(band - 1) * cols + col);
    } else {
      if (lead && col_ok) agg[uint64_t(band) * cols + col] = total;
      __syncthreads();
      if (tid < 32) {
        if (tid == 0) {
          __threadfence();
          StoreRelaxed(my_flags + band, kAggregate);
        }
        const uint32_t from = FindInclusive(my_flags, band, ctile);
        if (tid == 0) s_from = from;
      }
      __syncthreads();
      if (lead && col_ok) {
        const uint32_t from = s_from;
        prefix = LoadValue(inc + uint64_t(from) * cols + col);
        uint32_t p = from + 1;
        for (; p + 4 <= band; p += 4) {  // independent loads, folded in order
          T a[4];
#pragma unroll
          for (int u = 0; u < 4; ++u) a[u] = LoadValue(agg + uint64_t(p + u) * cols + col);
#pragma unroll
          for (int u = 0; u < 4; ++u) prefix = op(prefix, a[u]);
        }
        for (; p < band; ++p) prefix = op(prefix, LoadValue(agg + uint64_t(p) * cols + col));
      }
    }
    if (lead) {
      const T inclusive = op(prefix, total);
      if (col_ok) {
        if (band + 1 < bands) inc[uint64_t(band) * cols + col] = inclusive;
        if (carry_out && band + 1 == bands) carry_out[col] = inclusive;
      }
      s_prefix[c] = prefix;
    }
    __syncthreads();
    if (tid == 0 && band + 1 < bands) {
      __threadfence();
      StoreRelaxed(my_flags + band, kInclusive);
    }
    // Scan the rows from the prefix above this thread's rows.
    T acc = s_prefix[c];
    for (int k = 0; k < g; ++k) acc = op(acc, s_part[k * cw + c]);
    if (exclusive) {
#pragma unroll
      for (int i = 0; i < R; ++i) {
        const T x = v[i];
        v[i] = acc;
        acc = op(acc, x);
      }
    } else {
#pragma unroll
      for (int i = 0; i < R; ++i) v[i] = acc = op(acc, v[i]);
    }
    T* dst = out + row0 * cols + col;
    if (col_ok && row0 + R <= rows) {
#pragma unroll
      for (int i = 0; i < R; ++i) dst[i * cols] = v[i];
    } else if (col_ok) {
#pragma unroll
      for (int i = 0; i < R; ++i) {
        if (row0 + i < rows) dst[i * cols] = v[i];
      }
    }
  }
}

// A tile in tile units: band (row group) and column tile (strip); band == ~0u: none.
struct TileRef {
  uint32_t band, ctile;
};

template <class T, class Op, class S>
__global__ void __launch_bounds__(S::kThreads)
    AxisKernel(const T* in, T* out, uint64_t rows, uint64_t cols, bool exclusive, const T* carry_in, T* carry_out,
               uint32_t bands, uint32_t ctiles) {
  constexpr int R = S::kR, C = S::kC, V = S::kV, kStages = S::kS, N = S::kThreads, W = S::kWidth;
  constexpr int kVecs = C / V;  // vectors a tile row
  // Rows a column fold reads into registers at once: shared loads issued together, not one
  // load-op-store round trip a row (that ran at ~36 cycles a row, 2^20 x 256 float: 19 ms).
  constexpr int kBatch = 16;
  static_assert(R % kBatch == 0, "whole batches");
  using VecT = Vec<T, V>;
  extern __shared__ __align__(16) unsigned char smem[];
  const int tid = threadIdx.x;
  const Op op;
  auto buffer = [&](uint64_t k) { return reinterpret_cast<T*>(smem) + (k % kStages) * (R * W); };
  auto height = [&](uint32_t b) { return static_cast<int>(min(uint64_t(R), rows - uint64_t(b) * R)); };
  auto width = [&](uint32_t c) { return static_cast<int>(min(uint64_t(C), cols - uint64_t(c) * C)); };

  // Static walks: rows owns row groups (band = group, ctile walks), strip owns strips (ctile =
  // strip, band walks). A cursor steps through the block's tiles without a division.
  const uint32_t units = S::kMode == Walk::kRows ? bands : ctiles;
  const uint32_t per = S::kMode == Walk::kRows ? ctiles : bands;
  struct Cursor {
    uint32_t unit, pos;
  };
  auto ref_of = [&](Cursor c) -> TileRef {
    if (c.unit >= units) return TileRef{~0u, 0};
    return S::kMode == Walk::kRows ? TileRef{c.unit, c.pos} : TileRef{c.pos, c.unit};
  };
  auto advance = [&](Cursor& c) {
    if (++c.pos == per) {
      c.pos = 0;
      c.unit += gridDim.x;
    }
  };

  auto load = [&](uint64_t k, TileRef t) {
    if (t.band != ~0u) {
      T* buf = buffer(k);
      const int nr = height(t.band), nc = width(t.ctile);
      const T* src = in + uint64_t(t.band) * R * cols + uint64_t(t.ctile) * C;
      if (nr == R && nc == C) {
        static_assert((R * kVecs) % N == 0, "the block covers whole tiles");
#pragma unroll 8
        for (int e = tid; e < R * kVecs; e += N) {
          const int r = e / kVecs, j = e % kVecs * V;
          __pipeline_memcpy_async(buf + r * W + j, src + uint64_t(r) * cols + j, sizeof(VecT));
        }
      } else {
        for (int e = tid; e < nr * kVecs; e += N) {
          const int r = e / kVecs, j = e % kVecs * V;
          if (j < nc) __pipeline_memcpy_async(buf + r * W + j, src + uint64_t(r) * cols + j, sizeof(VecT));
        }
      }
    }
    __pipeline_commit();  // empty past the last tile: the waits stay uniform
  };
  auto store = [&](uint64_t k, TileRef t) {
    const T* buf = buffer(k);
    const int nr = height(t.band), nc = width(t.ctile);
    T* dst = out + uint64_t(t.band) * R * cols + uint64_t(t.ctile) * C;
    if (nr == R && nc == C) {
#pragma unroll 8
      for (int e = tid; e < R * kVecs; e += N) {
        const int r = e / kVecs, j = e % kVecs * V;
        *reinterpret_cast<VecT*>(dst + uint64_t(r) * cols + j) = *reinterpret_cast<const VecT*>(buf + r * W + j);
      }
    } else {
      for (int e = tid; e < nr * kVecs; e += N) {
        const int r = e / kVecs, j = e % kVecs * V;
        if (j < nc) {
          *reinterpret_cast<VecT*>(dst + uint64_t(r) * cols + j) = *reinterpret_cast<const VecT*>(buf + r * W + j);
        }
      }
    }
  };

  Cursor load_at{blockIdx.x, 0}, fold_at{blockIdx.x, 0};
  for (int i = 0; i < kStages - 1; ++i) {
    load(i, ref_of(load_at));
    advance(load_at);
  }

  T acc{};  // the fold of this thread's row (column) so far
  for (uint64_t k = 0;; ++k) {
    __pipeline_wait_prior(kStages - 2);  // tile k has landed (this thread's copies)
    __syncthreads();                     // everyone's; tile k - 1's stores are done
    const TileRef cur = ref_of(fold_at);
    if (cur.band == ~0u) break;
    load(k + kStages - 1, ref_of(load_at));
    advance(load_at);
    T* buf = buffer(k);
    const int nr = height(cur.band), nc = width(cur.ctile);

    // The fold, inclusive or exclusive (a template constant: two copies of the loops only).
    auto fold_tile = [&](auto excl) {
      constexpr bool kExcl = decltype(excl)::value;
      // x -> its output; acc holds the fold so far.
      auto step = [&](T& x) {
        const T y = x;
        if constexpr (kExcl) {
          x = acc;
          acc = op(acc, y);
        } else {
          x = acc = op(acc, y);
        }
      };
      auto first = [&](T& x) {  // the first element of a row / column without a carry
        acc = x;
        if constexpr (kExcl) x = Op::identity();
      };
      if constexpr (S::kMode == Walk::kRows) {
        if (tid < nr) {
          T* row = buf + tid * W;
          int j = 0;
          if (cur.ctile == 0) {
            first(row[0]);
            j = 1;
          }
          if constexpr (V > 1) {
            auto* vrow = reinterpret_cast<VecT*>(row);
            int q = 0;
            if (j == 1) {  // the rest of the first vector
              VecT v = vrow[0];
#pragma unroll
              for (int x = 1; x < V; ++x) step(v.e[x]);
              vrow[0] = v;
              q = 1;
            }
            if (q == 0 && nc == C) {  // kBatch vectors read, folded, written back at once
              constexpr int kBatch = kVecs % 4 == 0 ? 4 : 1;
#pragma unroll 2
              for (int i = 0; i < kVecs; i += kBatch) {
                VecT v[kBatch];
#pragma unroll
                for (int u = 0; u < kBatch; ++u) v[u] = vrow[i + u];
#pragma unroll
                for (int u = 0; u < kBatch; ++u) {
#pragma unroll
                  for (int x = 0; x < V; ++x) step(v[u].e[x]);
                }
#pragma unroll
                for (int u = 0; u < kBatch; ++u) vrow[i + u] = v[u];
              }
            } else {
              for (; q < nc / V; ++q) {
                VecT v = vrow[q];
#pragma unroll
                for (int x = 0; x < V; ++x) step(v.e[x]);
                vrow[q] = v;
              }
            }
          } else {
            if (j == 0 && nc == C) {
              static_assert(C % 16 == 0, "whole batches");
#pragma unroll 1
              for (int i = 0; i < C; i += 16) {
                T v[16];
#pragma unroll
                for (int u = 0; u < 16; ++u) v[u] = row[i + u];
#pragma unroll
                for (int u = 0; u < 16; ++u) step(v[u]);
#pragma unroll
                for (int u = 0; u < 16; ++u) row[i + u] = v[u];
              }
            } else {
              for (; j < nc; ++j) step(row[j]);
            }
          }
        }
      } else if (tid < nc) {  // a thread a column, top to bottom
        const uint64_t col = uint64_t(cur.ctile) * C + tid;
        T* x = buf + tid;
        int r = 0;
        if (cur.band == 0) {
          if (carry_in) {
            acc = carry_in[col];
          } else {
            first(x[0]);
            r = 1;
          }
        }  // kStrip: acc goes on from the band above, in this thread's register
        if (r == 0 && nr == R) {  // kBatch rows read into registers at once, folded, written back
#pragma unroll 1
          for (int i = 0; i < R; i += kBatch) {
            T v[kBatch];
#pragma unroll
            for (int u = 0; u < kBatch; ++u) v[u] = x[(i + u) * W];
#pragma unroll
            for (int u = 0; u < kBatch; ++u) step(v[u]);
#pragma unroll
            for (int u = 0; u < kBatch; ++u) x[(i + u) * W] = v[u];
          }
        } else {
          for (; r < nr; ++r) step(x[r * W]);
        }
        if (carry_out && cur.band + 1u == bands) carry_out[col] = acc;
      }
    };
    if (exclusive) {
      fold_tile(std::true_type{});
    } else {
      fold_tile(std::false_type{});
    }
    __syncthreads();  // the tile is folded
    store(k, cur);
    advance(fold_at);
  }
}

// out[j] = carry ? carry[j] : identity (ScanColumns of zero rows).
template <class T, class Op>
__global__ void CarryThrough(const T* carry_in, T* carry_out, uint64_t cols) {
  for (uint64_t j = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; j < cols; j += uint64_t(gridDim.x) * blockDim.x) {
    carry_out[j] = carry_in ? carry_in[j] : Op::identity();
  }
}

inline std::size_t AlignUp(std::size_t x) { return (x + 255) & ~std::size_t(255); }
constexpr std::size_t kMinTemp = 256;  // never 0: a null d_temp with 0 bytes would read as a query

inline cudaError_t SmCount(int& sms) {
  static std::atomic<int> known[detail::kKeptDevices] = {};
  return detail::KeptForDevice(known, sms, [](int device, int& value) {
    return cudaDeviceGetAttribute(&value, cudaDevAttrMultiProcessorCount, device);
  });
}

template <class T, class Op, class S>
cudaError_t Launch(const T* in, T* out, uint64_t rows, uint64_t cols, bool exclusive, const T* carry_in, T* carry_out,
                   cudaStream_t stream) {
  const uint64_t bands = (rows + S::kR - 1) / S::kR, ctiles = (cols + S::kC - 1) / S::kC;
  if (bands >= 0xffffffffull || ctiles >= 0xffffffffull) return cudaErrorInvalidValue;
  uint64_t resident = 0;
  if (cudaError_t e = detail::ResidentBlocks<AxisKernel<T, Op, S>>(S::kThreads, int(S::kSmem), resident);
      e != cudaSuccess) {
    return e;
  }
  const uint64_t work = S::kMode == Walk::kRows ? bands : ctiles;
  const auto grid = static_cast<unsigned>(std::max<uint64_t>(1, std::min(work, resident)));
  AxisKernel<T, Op, S><<<grid, S::kThreads, S::kSmem, stream>>>(in, out, rows, cols, exclusive, carry_in, carry_out,
                                                                 uint32_t(bands), uint32_t(ctiles));
  return cudaGetLastError();
}

constexpr int kRowBytes = 256;  // a tile row: 256 bytes of the matrix row

template <class T>
bool WholeVectors(uint64_t cols, const void* a, const void* b) {
  return sizeof(T) == 4 && cols % 4 == 0 && reinterpret_cast<std::uintptr_t>(a) % 16 == 0 &&
         reinterpret_cast<std::uintptr_t>(b) % 16 == 0;
}

template <class T, class Op>
cudaError_t ScanRows(void* d_temp, std::size_t& temp_bytes, const T* d_in, T* d_out, uint64_t rows, uint64_t cols,
                     bool exclusive, cudaStream_t stream) {
  if (!d_temp) {
    temp_bytes = kMinTemp;
    return cudaSuccess;
  }
  if (rows == 0 || cols == 0) return cudaSuccess;
  constexpr int C = kRowBytes / int(sizeof(T));
  // 4-byte types move 16 bytes an access where they can; 8-byte ones move 8 (one element), so
  // their vector kernels are not instantiated (compile time).
  if constexpr (sizeof(T) == 4) {
    if (WholeVectors<T>(cols, d_in, d_out)) {
      using S = Shape<Walk::kRows, T, 32, C, 4, 4>;
      return Launch<T, Op, S>(d_in, d_out, rows, cols, exclusive, nullptr, nullptr, stream);
    }
  }
  using S = Shape<Walk::kRows, T, 32, C, 1, 4>;
  return Launch<T, Op, S>(d_in, d_out, rows, cols, exclusive, nullptr, nullptr, stream);
}

// Float SUM and PRODUCT: only the strict top-to-bottom fold gives numpy's bits.
template <class T, class Op>
constexpr bool kStrict = std::is_floating_point_v<T> &&
                         (std::is_same_v<Op, ops::Sum<T>> || std::is_same_v<Op, ops::Product<T>>);
constexpr int kLookRows = 128;

// The look-back walk's layout in temp: the ticket counter, the flags (both zeroed each call),
// then the aggregates and the inclusive values, bands x cols each.
template <class T>
constexpr int kLookR = sizeof(T) == 4 ? 64 : 32;  // rows a thread holds: 64 KiB tiles at cw = 256
struct LookPlan {
  int cw_log2;
  uint64_t bands, ctiles;
  std::size_t flag_bytes, value_bytes, bytes;
};
template <class T>
LookPlan PlanLook(uint64_t rows, uint64_t cols) {
  LookPlan p{};
  p.cw_log2 = 5;
  while (p.cw_log2 < 8 && (uint64_t(1) << p.cw_log2) < cols) ++p.cw_log2;
  const uint64_t band_rows = uint64_t(kLookThreads >> p.cw_log2) * kLookR<T>;
  p.bands = (rows + band_rows - 1) / band_rows;
  p.ctiles = (cols + (uint64_t(1) << p.cw_log2) - 1) >> p.cw_log2;
  p.flag_bytes = 256 + AlignUp(p.bands * p.ctiles * sizeof(unsigned));
  p.value_bytes = AlignUp(p.bands * cols * sizeof(T));
  p.bytes = 256 + p.flag_bytes + 2 * p.value_bytes;
  return p;
}

template <class T, class Op, int R>
cudaError_t LaunchLook(const LookPlan& p, void* d_temp, const T* in, T* out, uint64_t rows, uint64_t cols,
                       bool exclusive, const T* carry_in, T* carry_out, cudaStream_t stream) {
  if (p.bands >= 0xffffffffull || p.ctiles >= 0xffffffffull) return cudaErrorInvalidValue;
  auto* base = reinterpret_cast<unsigned char*>(AlignUp(reinterpret_cast<std::size_t>(d_temp)));
  auto* counter = reinterpret_cast<unsigned long long*>(base);
  auto* flags = reinterpret_cast<unsigned*>(base + 256);
  auto* agg = reinterpret_cast<T*>(base + p.flag_bytes);
  auto* inc = reinterpret_cast<T*>(base + p.flag_bytes + p.value_bytes);
  if (cudaError_t e = cudaMemsetAsync(base, 0, p.flag_bytes, stream); e != cudaSuccess) return e;
  uint64_t resident = 0;
  if (cudaError_t e = detail::ResidentBlocks<LookKernel<T, Op, R>>(kLookThreads, 0, resident); e != cudaSuccess) {
    return e;
  }
  const auto grid = static_cast<unsigned>(std::max<uint64_t>(1, std::min(p.bands * p.ctiles, resident)));
  LookKernel<T, Op, R><<<grid, kLookThreads, 0, stream>>>(in, out, rows, cols, exclusive, carry_in, carry_out, flags,
                                                          agg, inc, counter, p.cw_log2, uint32_t(p.bands),
                                                          uint32_t(p.ctiles));
  return cudaGetLastError();
}

// The walk ScanColumns takes: look-back for exact operators when the strips are fewer than the
// SMs (and there is more than one band); for strict folds with few strips, narrow strips (64
// bytes of each row, 1024-row tiles, 3 stages: 2^20 x 256 float is 16 blocks, each streaming its
// columns alone at the pace of one dependent add a row); else strips of 64-row tiles.
enum class ColumnPlan { kStrip64, kNarrow, kLook };
constexpr int kNarrowBytes = 64, kNarrowRows = 1024;

template <class T, class Op>
cudaError_t PlanColumns(uint64_t rows, uint64_t cols, ColumnPlan& plan) {
  constexpr int C = kRowBytes / int(sizeof(T));
  int sms = 0;
  if (cudaError_t e = SmCount(sms); e != cudaSuccess) return e;
  const uint64_t strips = (cols + C - 1) / C;
  plan = ColumnPlan::kStrip64;
  if (strips < uint64_t(sms)) {
    if constexpr (kStrict<T, Op>) {
      plan = ColumnPlan::kNarrow;
    } else {
      if (rows > uint64_t(kLookRows)) plan = ColumnPlan::kLook;
    }
  }
  return cudaSuccess;
}

template <class T, class Op>
cudaError_t ScanColumns(void* d_temp, std::size_t& temp_bytes, const T* d_in, T* d_out, uint64_t rows, uint64_t cols,
                        bool exclusive, const T* d_carry_in, T* d_carry_out, cudaStream_t stream) {
  constexpr int C = kRowBytes / int(sizeof(T));
  ColumnPlan plan = ColumnPlan::kStrip64;
  if (cols > 0 && rows > 0) {
    if (cudaError_t e = PlanColumns<T, Op>(rows, cols, plan); e != cudaSuccess) return e;
  }
  LookPlan look{};
  std::size_t needed = kMinTemp;
  if (plan == ColumnPlan::kLook) {
    look = PlanLook<T>(rows, cols);
    needed = look.bytes;
  }
  if (!d_temp) {
    temp_bytes = needed;
    return cudaSuccess;
  }
  if (temp_bytes < needed) return cudaErrorInvalidValue;
  if (cols == 0) return cudaSuccess;
  if (rows == 0) {
    if (!d_carry_out) return cudaSuccess;
    const auto blocks = static_cast<unsigned>(std::min<uint64_t>((cols + 255) / 256, 1024));
    CarryThrough<T, Op><<<blocks, 256, 0, stream>>>(d_carry_in, d_carry_out, cols);
    return cudaGetLastError();
  }
  const bool vec = WholeVectors<T>(cols, d_in, d_out);
  if (plan == ColumnPlan::kLook) {
    if constexpr (!kStrict<T, Op>) {
      return LaunchLook<T, Op, kLookR<T>>(look, d_temp, d_in, d_out, rows, cols, exclusive, d_carry_in, d_carry_out,
                                          stream);
    }
  } else if (plan == ColumnPlan::kNarrow) {
    if constexpr (kStrict<T, Op>) {
      constexpr int kNarrowCols = kNarrowBytes / int(sizeof(T));
      if constexpr (sizeof(T) == 4) {
        if (vec) {
          using S = Shape<Walk::kStrip, T, kNarrowRows, kNarrowCols, 4, 3, 128>;
          return Launch<T, Op, S>(d_in, d_out, rows, cols, exclusive, d_carry_in, d_carry_out, stream);
        }
      }
      using S = Shape<Walk::kStrip, T, kNarrowRows, kNarrowCols, 1, 3, 128>;
      return Launch<T, Op, S>(d_in, d_out, rows, cols, exclusive, d_carry_in, d_carry_out, stream);
    }
  }
  if constexpr (sizeof(T) == 4) {
    if (vec) {
      using S = Shape<Walk::kStrip, T, 64, C, 4, 4>;
      return Launch<T, Op, S>(d_in, d_out, rows, cols, exclusive, d_carry_in, d_carry_out, stream);
    }
  }
  using S = Shape<Walk::kStrip, T, 64, C, 1, 4>;
  return Launch<T, Op, S>(d_in, d_out, rows, cols, exclusive, d_carry_in, d_carry_out, stream);
}

}  // namespace gpuscan::kernels::axis_detail

template <class T, class Op>
cudaError_t gpuscan::kernels::ScanRows(void* d_temp, std::size_t& temp_bytes, const T* d_in, T* d_out, uint64_t rows,
                                       uint64_t cols, bool exclusive, cudaStream_t stream) {
  return axis_detail::ScanRows<T, Op>(d_temp, temp_bytes, d_in, d_out, rows, cols, exclusive, stream);
}

template <class T, class Op>
cudaError_t gpuscan::kernels::ScanColumns(void* d_temp, std::size_t& temp_bytes, const T* d_in, T* d_out,
                                          uint64_t rows, uint64_t cols, bool exclusive, const T* d_carry_in,
                                          T* d_carry_out, cudaStream_t stream) {
  return axis_detail::ScanColumns<T, Op>(d_temp, temp_bytes, d_in, d_out, rows, cols, exclusive, d_carry_in,
                                         d_carry_out, stream);
}

#define GPUSCAN_INSTANTIATE_SCAN_AXIS(T, OP)                                                                     \
  template cudaError_t gpuscan::kernels::ScanRows<T, gpuscan::ops::OP<T>>(void*, std::size_t&, const T*, T*,     \
                                                                          uint64_t, uint64_t, bool, cudaStream_t); \
  template cudaError_t gpuscan::kernels::ScanColumns<T, gpuscan::ops::OP<T>>(                                    \
      void*, std::size_t&, const T*, T*, uint64_t, uint64_t, bool, const T*, T*, cudaStream_t);
