// The 2-D scan kernel (gpuscan/kernels/scan2d.h).
//
// The matrix is cut into tiles (TileShape: 128 x 128 for 4-byte types, 64 x 128 for 8-byte ones);
// tile (b, c) is band b's c-th. Tile (b, c) needs
// two things from other tiles: each of its rows' fold so far (the right edge of (b, c - 1)'s
// row folds) and each of its columns' value in the row above it (the last row of (b - 1, c),
// scanned). Tiles are taken by tickets in anti-diagonal order (b + c ascending, then b), so both
// of a tile's sources hold lower tickets: the lowest unfinished ticket can always go on, whatever
// order blocks run in (no deadlock), and blocks are persistent (as many as fit at once).
//
// A block keeps three tiles going in shared memory: the next one's copy in flight (cp.async),
// this one's row folds (the row half: a thread per row), and the one before's column folds and
// stores (the column half: a thread per column), one barrier apart. DRAM traffic: one read and
// one write of the matrix. 4-byte tables of whole 16-byte rows copy in, fold rows and store out
// four elements an access: fewer instructions a tile was worth 6 points of copy (bench/NOTES.md).
//
// Why tiles and not bands: a block per band of rows walked left to right made band b start b
// hand-offs after band 0 and end as late: ~180 us of 1000 at 16384 x 16384 on the H100 were
// that ramp, and 4 of 132 SMs had no band (bench/NOTES.md). By tiles, the ramp is the first and
// last few diagonals only.
//
// Hand-offs need no fence: a value travels with its token in one 16-byte word (tile_state.cuh's
// relaxed 128-bit store), and each consumer thread waits for its own word only. Column words:
// two rows of cols, band b writes row b % 2 with token b + 1. Row words: two columns of rows,
// tile column c writes column c % 2 with token c + 1 (c + 1 < tiles only). A word is rewritten
// two bands (tile columns) later, only after the tile between has read it.
//
// A caution from the measurements (bench/NOTES.md): float32 tiles of 64 x 128 at two blocks a
// SM hung in stress runs (one launch in a few hundred) before the polls had a bound, and no
// cause was found; the kept shapes ran thousands of launches without one. Polls now give up
// after ~2^23 tries (seconds) with a message and a trap, so a hang would end as an error.
#pragma once

#include <cuda_pipeline.h>
#include <cuda_runtime.h>

#include <cstdio>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "gpuscan/kernels/operators.h"
#include "gpuscan/kernels/scan2d.h"
#include "device_facts.cuh"
#include "tile_state.cuh"

namespace gpuscan::kernels::scan2d_detail {

using detail::TileWord;

constexpr int kBuffers = 3;  // row half's tile, column half's tile, the next tile in flight

// A tile of R rows (a thread each: the row half) and C columns (a thread each: the column half).
// V > 1: the tile moves V elements (16 bytes) an access where it can, copies in, row folds and
// stores out; rows are padded by V elements so the row half's 16-byte reads stay free of bank
// conflicts (8 threads of a quarter-warp, rows C + V words apart, cover the 32 banks). V = 1:
// element by element, rows padded by one.
template <int R, int C, int V = 1>
struct TileShape {
  static constexpr int kRows = R, kCols = C, kThreads = R + C, kVec = V, kPad = V;
  template <class T>
  static constexpr std::size_t kBytes = std::size_t(R) * (C + kPad) * sizeof(T);
  static_assert(C % V == 0, "a row is whole vectors");
};

template <class T, int V>
struct alignas(sizeof(T) * V) Vec {
  T e[V];
};

inline std::size_t AlignUp(std::size_t x) { return (x + 255) & ~std::size_t(255); }

// The column half's own barrier. Its threads reach it from divergent polls: bar.sync is
// barrier.sync.aligned, which a warp must execute converged (undefined otherwise), so the warp
// reconverges first and the barrier is the unaligned form.
template <int kCount>
__device__ __forceinline__ void ColumnHalfBarrier() {
  __syncwarp();
  asm volatile("barrier.sync 1, %0;" ::"n"(kCount) : "memory");
}

// A hand-off word that has not come after ~2^23 polls (several seconds: a hop takes
// microseconds) will not come: the kernel stops with an error instead of hanging its stream.
constexpr uint32_t kMaxSpins = 1u << 23;
static __device__ __noinline__ void GiveUp(const char* what, uint32_t band, uint32_t col, unsigned long long status,
                                           uint32_t want) {
  printf("gpuscan scan2d: tile (%u, %u) block %u thread %u: the %s word never came (token %llu, waiting for %u)\n",
         band, col, blockIdx.x, threadIdx.x, what, status, want);
  __trap();
}

// Tile (band, col)'s wait for the `what` word at p to carry `token`; returns the value's bits.
__device__ __forceinline__ unsigned long long WaitWord(const TileWord* p, uint32_t token, const char* what,
                                                       uint32_t band, uint32_t col) {
  unsigned long long status, bits;
  for (uint32_t spins = 0;; ++spins) {
    detail::LoadTileWord(p, status, bits);
    if (status == token) return bits;
    if (spins >= 4) __nanosleep(64);  // a late word: leave the L2 to the stores it waits for
    if (spins == kMaxSpins) GiveUp(what, band, col, status, token);
  }
}

struct Grid {
  uint32_t bands, tiles;  // tiles a band
  uint64_t total;         // bands * tiles
};

// n(n + 1) / 2 <= r: the largest such n.
__device__ __forceinline__ uint64_t Triangle(uint64_t r) {
  uint64_t n = static_cast<uint64_t>((sqrt(8.0 * double(r) + 1.0) - 1.0) / 2.0);
  while (n * (n + 1) / 2 > r) --n;
  while ((n + 1) * (n + 2) / 2 <= r) ++n;
  return n;
}

// Tile (b, c) of ticket t: diagonals d = b + c in order, b ascending along one. With m / M the
// smaller / larger of bands and tiles: diagonals 0..m-2 grow by one tile, m-1..M-1 hold m, the
// rest shrink by one (counted from the end, as the first ones).
__device__ __forceinline__ void TileOfTicket(uint64_t t, const Grid& g, uint32_t& b, uint32_t& c) {
  const uint64_t m = min(g.bands, g.tiles), M = max(g.bands, g.tiles);
  const uint64_t head = m * (m - 1) / 2;
  uint64_t d, first;
  if (t < head) {
    d = Triangle(t);
    first = d * (d + 1) / 2;
  } else if (t < head + (M - m + 1) * m) {
    d = m - 1 + (t - head) / m;
    first = head + (d - (m - 1)) * m;
  } else {
    const uint64_t r = g.total - 1 - t, dd = Triangle(r);
    d = uint64_t(g.bands) + g.tiles - 2 - dd;
    first = g.total - (dd + 1) * (dd + 2) / 2;
  }
  const uint64_t b_min = d >= g.tiles ? d - (g.tiles - 1) : 0;
  b = static_cast<uint32_t>(b_min + (t - first));
  c = static_cast<uint32_t>(d - b);
}

template <class T, class Op, class Shape>
__global__ void __launch_bounds__(Shape::kThreads, 1)
    Scan2DKernel(const T* __restrict__ in, T* __restrict__ out, uint64_t rows, uint64_t cols,
                 const T* __restrict__ carry_in, TileWord* col_words, TileWord* row_words,
                 unsigned long long* counter, Grid g) {
  constexpr int kRows = Shape::kRows, C = Shape::kCols, kThreads = Shape::kThreads;
  constexpr int V = Shape::kVec, kVecs = C / V, kWidth = C + Shape::kPad;  // kVecs: vectors a row
  using Row = T[kWidth];
  using VecT = Vec<T, V>;
  extern __shared__ __align__(16) unsigned char smem[];
  auto buffer = [&](unsigned k) { return reinterpret_cast<Row*>(smem) + (k % kBuffers) * kRows; };
  // The block's k-th tile: (s_band, s_col)[k % 4], s_band == ~0u past the last ticket.
  __shared__ uint32_t s_band[4], s_col[4];
  const int tid = threadIdx.x;
  const Op op;
  auto width = [&](uint32_t c) { return static_cast<int>(min(uint64_t(C), cols - uint64_t(c) * C)); };
  auto height = [&](uint32_t b) { return static_cast<int>(min(uint64_t(kRows), rows - uint64_t(b) * kRows)); };
  // Thread 0 draws tickets two tiles ahead of the row half; the atomic's round trip overlaps a
  // whole tile.
  unsigned long long ahead = 0;
  auto publish = [&](unsigned k, unsigned long long t) {
    if (t < g.total) {
      TileOfTicket(t, g, s_band[k % 4], s_col[k % 4]);
    } else {
      s_band[k % 4] = ~0u;
    }
  };
  if (tid == 0) {
    publish(0, atomicAdd(counter, 1ull));
    publish(1, atomicAdd(counter, 1ull));
    ahead = atomicAdd(counter, 1ull);
  }
  __syncthreads();

  // Copies the block's k-th tile into its buffer with every thread (cp.async: no registers held
  // while the copies fly). A full tile takes the unrolled path.
  auto load = [&](unsigned k) {
    const uint32_t b = s_band[k % 4];
    if (b != ~0u) {
      const uint32_t c = s_col[k % 4];
      Row* t = buffer(k);
      const int nr = height(b), nc = width(c);
      const T* src = in + uint64_t(b) * kRows * cols + uint64_t(c) * C;
      if constexpr (V > 1) {  // widths are whole vectors here (Launch checks cols and alignment)
        if (nr == kRows && nc == C) {
          constexpr int kStep = kThreads / kVecs;  // rows a step
          static_assert(kThreads % kVecs == 0, "the block's threads cover whole rows");
          const int r0 = tid / kVecs, j = tid % kVecs * V;
#pragma unroll 16
          for (int r = r0; r < kRows; r += kStep) {
            __pipeline_memcpy_async(&t[r][j], src + uint64_t(r) * cols + j, sizeof(VecT));
          }
        } else {
          for (int e = tid; e < nr * kVecs; e += kThreads) {
            const int r = e / kVecs, j = e % kVecs * V;
            if (j < nc) __pipeline_memcpy_async(&t[r][j], src + uint64_t(r) * cols + j, sizeof(VecT));
          }
        }
      } else if (nr == kRows && nc == C && kThreads % C == 0) {  // kThreads / C rows a step
        constexpr int kStep = kThreads / C;
        const int r0 = tid / C, j = tid % C;
#pragma unroll 16
        for (int r = r0; r < kRows; r += kStep) __pipeline_memcpy_async(&t[r][j], src + uint64_t(r) * cols + j, sizeof(T));
      } else if (nr == kRows && nc == C) {
#pragma unroll 16
        for (int e = tid; e < kRows * C; e += kThreads) {
          const int r = e / C, j = e % C;
          __pipeline_memcpy_async(&t[r][j], src + uint64_t(r) * cols + j, sizeof(T));
        }
      } else {
        for (int e = tid; e < nr * C; e += kThreads) {
          const int r = e / C, j = e % C;
          if (j < nc) __pipeline_memcpy_async(&t[r][j], src + uint64_t(r) * cols + j, sizeof(T));
        }
      }
    }
    __pipeline_commit();  // an empty group past the last tile keeps the wait below uniform
  };

  load(0);
  for (unsigned s = 0;; ++s) {
    load(s + 1);  // into the buffer tile s - 2 left
    if (tid == 0) {
      publish(s + 2, ahead);
      if (ahead < g.total) ahead = atomicAdd(counter, 1ull);
    }
    __pipeline_wait_prior(1);  // tile s has landed (this thread's copies)
    __syncthreads();           // ... everyone's, tile s - 1's row folds are done, s + 2 is known
    const uint32_t rb = s_band[s % 4], cb = s > 0 ? s_band[(s - 1) % 4] : ~0u;
    if (rb == ~0u && cb == ~0u) break;

    if (tid < kRows) {  // the row half: tile s, rows left to right
      if (rb != ~0u && tid < height(rb)) {
        const uint32_t c = s_col[s % 4];
        T* row = buffer(s)[tid];
        const int nc = width(c);
        const uint64_t r = uint64_t(rb) * kRows + tid;
        T racc;
        if constexpr (V > 1) {  // four elements a 16-byte read and write
          auto* vrow = reinterpret_cast<VecT*>(row);
          const int nv = nc / V;
          auto fold = [&](VecT& v, int from) {
#pragma unroll
            for (int x = from; x < V; ++x) v.e[x] = racc = op(racc, v.e[x]);
          };
          int q = 0;
          if (c == 0) {
            VecT v = vrow[q];
            racc = v.e[0];
            fold(v, 1);
            vrow[q++] = v;
          } else {  // the row's fold so far, from the tile to the left
            racc = detail::FromBits<T>(WaitWord(row_words + uint64_t((c - 1) & 1u) * rows + r, c, "row", rb, c));
          }
          if (q == 0 && nc == C) {
#pragma unroll 8
            for (int i = 0; i < kVecs; ++i) {
              VecT v = vrow[i];
              fold(v, 0);
              vrow[i] = v;
            }
          } else {
            for (; q < nv; ++q) {
              VecT v = vrow[q];
              fold(v, 0);
              vrow[q] = v;
            }
          }
        } else {
          int j = 0;
          if (c == 0) {
            racc = row[j++];
          } else {  // the row's fold so far, from the tile to the left
            racc = detail::FromBits<T>(WaitWord(row_words + uint64_t((c - 1) & 1u) * rows + r, c, "row", rb, c));
          }
          if (j == 0 && nc == C) {  // constant trip count: the loads run ahead of the fold
#pragma unroll 32
            for (int i = 0; i < C; ++i) row[i] = racc = op(racc, row[i]);
          } else {
            for (; j < nc; ++j) row[j] = racc = op(racc, row[j]);
          }
        }
        if (c + 1 < g.tiles) {  // the row's fold so far, for the tile to the right
          detail::StoreTileWord(row_words + uint64_t(c & 1u) * rows + r, c + 1ull, detail::ToBits(racc));
        }
      }
    } else if (cb != ~0u) {  // the column half: tile s - 1, columns top to bottom, then out
      const uint32_t band = cb, c = s_col[(s - 1) % 4];
      Row* t = buffer(s - 1);
      const int nr = height(band), nc = width(c), k = tid - kRows;
      const uint64_t col0 = uint64_t(c) * C;
      if (k < nc) {
        const uint64_t col = col0 + k;
        int r = 0;
        T acc;
        if (band > 0) {  // the band above's last row at this column, once it is there
          const TileWord* above = col_words + uint64_t((band + 1u) & 1u) * cols + col;
          acc = detail::FromBits<T>(WaitWord(above, band, "column", band, c));
        } else if (carry_in) {
          acc = carry_in[col];
        } else {
          acc = t[r++][k];
        }
        if (r == 0 && nr == kRows) {
#pragma unroll 32
          for (int i = 0; i < kRows; ++i) t[i][k] = acc = op(acc, t[i][k]);
        } else {
          for (; r < nr; ++r) t[r][k] = acc = op(acc, t[r][k]);
        }
        detail::StoreTileWord(col_words + uint64_t(band & 1u) * cols + col, band + 1ull, detail::ToBits(acc));
      }
      ColumnHalfBarrier<C>();  // every column's fold is in the buffer
      T* dst = out + uint64_t(band) * kRows * cols + col0;
      if constexpr (V > 1) {  // 16-byte reads and stores: a warp writes 512 contiguous bytes
        if (nr == kRows && nc == C) {
          constexpr int kStep = C / kVecs;  // rows a step
          const int r0 = k / kVecs, j = k % kVecs * V;
#pragma unroll 8
          for (int r = r0; r < kRows; r += kStep) {
            *reinterpret_cast<VecT*>(dst + uint64_t(r) * cols + j) = *reinterpret_cast<const VecT*>(&t[r][j]);
          }
        } else {
          for (int e = k; e < nr * kVecs; e += C) {
            const int r = e / kVecs, j = e % kVecs * V;
            if (j < nc) {
              *reinterpret_cast<VecT*>(dst + uint64_t(r) * cols + j) = *reinterpret_cast<const VecT*>(&t[r][j]);
            }
          }
        }
      } else if (nr == kRows && nc == C) {
        const int r0 = k / C, j = k % C;  // 0 and k; written so, it keeps the stress-tested machine code
#pragma unroll 16
        for (int r = r0; r < kRows; ++r) dst[uint64_t(r) * cols + j] = t[r][j];
      } else {
        for (int e = k; e < nr * C; e += C) {
          const int r = e / C, j = e % C;
          if (j < nc) dst[uint64_t(r) * cols + j] = t[r][j];
        }
      }
    }
    __syncwarp();     // the polls above diverge: reconverge before the block's barrier
    __syncthreads();  // the next iteration's load refills tile s - 1's buffer
  }
}

template <class T, class Op, class Shape>
cudaError_t Launch(void* d_temp, std::size_t& temp_bytes, const T* d_in, T* d_out, uint64_t rows, uint64_t cols,
                   const T* d_carry, cudaStream_t stream) {
  const uint64_t bands = (rows + Shape::kRows - 1) / Shape::kRows;
  const uint64_t tiles = (cols + Shape::kCols - 1) / Shape::kCols;
  if (bands >= 0xffffffffull || tiles >= 0xffffffffull || (bands > 0 && tiles > (uint64_t{1} << 52) / bands)) {
    return cudaErrorInvalidValue;
  }
  // The ticket counter, two rows of column words and two columns of row words, zeroed each call
  // (a word's token is its band or tile column + 1: a zero never reads as published).
  const std::size_t zeroed = 256 + AlignUp(2 * cols * sizeof(TileWord)) + AlignUp(2 * rows * sizeof(TileWord));
  const std::size_t needed = zeroed + 256;
  if (!d_temp) {
    temp_bytes = needed;
    return cudaSuccess;
  }
  if (temp_bytes < needed) return cudaErrorInvalidValue;
  if (rows == 0 || cols == 0) return cudaSuccess;
  auto* base = reinterpret_cast<unsigned char*>(AlignUp(reinterpret_cast<std::size_t>(d_temp)));
  auto* counter = reinterpret_cast<unsigned long long*>(base);
  auto* col_words = reinterpret_cast<TileWord*>(base + 256);
  auto* row_words = reinterpret_cast<TileWord*>(base + 256 + AlignUp(2 * cols * sizeof(TileWord)));
  if (cudaError_t e = cudaMemsetAsync(base, 0, zeroed, stream); e != cudaSuccess) return e;
  const std::size_t smem = kBuffers * Shape::template kBytes<T>;
  uint64_t resident = 0;
  if (cudaError_t e = detail::ResidentBlocks<Scan2DKernel<T, Op, Shape>>(Shape::kThreads, int(smem), resident);
      e != cudaSuccess) {
    return e;
  }
  const Grid g{static_cast<uint32_t>(bands), static_cast<uint32_t>(tiles), bands * tiles};
  const auto grid = static_cast<unsigned>(std::min<uint64_t>(g.total, resident));
  Scan2DKernel<T, Op, Shape><<<grid, Shape::kThreads, smem, stream>>>(d_in, d_out, rows, cols, d_carry, col_words,
                                                                       row_words, counter, g);
  return cudaGetLastError();
}

template <class T, class Op>
cudaError_t Scan2D(void* d_temp, std::size_t& temp_bytes, const T* d_in, T* d_out, uint64_t rows, uint64_t cols,
                   const T* d_carry, cudaStream_t stream) {
  // Rows of 512 bytes for 4-byte types, 1 KiB for 8-byte ones (bench/NOTES.md: float64 gained 8
  // points from 1 KiB rows, float32 lost with every 1 KiB shape tried). 4-byte types move 16
  // bytes an access where the table allows it (77% -> 83% of copy at 16384^2); 8-byte ones gained
  // too little from it to carry a second kernel (bench/NOTES.md).
  if constexpr (sizeof(T) == 4) {
    const bool whole_vectors = cols % 4 == 0 && reinterpret_cast<std::uintptr_t>(d_in) % 16 == 0 &&
                               reinterpret_cast<std::uintptr_t>(d_out) % 16 == 0;
    if (whole_vectors) {
      return Launch<T, Op, TileShape<128, 128, 4>>(d_temp, temp_bytes, d_in, d_out, rows, cols, d_carry, stream);
    }
    return Launch<T, Op, TileShape<128, 128>>(d_temp, temp_bytes, d_in, d_out, rows, cols, d_carry, stream);
  } else {
    return Launch<T, Op, TileShape<64, 128>>(d_temp, temp_bytes, d_in, d_out, rows, cols, d_carry, stream);
  }
}

}  // namespace gpuscan::kernels::scan2d_detail

template <class T, class Op>
cudaError_t gpuscan::kernels::Scan2D(void* d_temp, std::size_t& temp_bytes, const T* d_in, T* d_out, uint64_t rows,
                                     uint64_t cols, const T* d_carry, cudaStream_t stream) {
  return scan2d_detail::Scan2D<T, Op>(d_temp, temp_bytes, d_in, d_out, rows, cols, d_carry, stream);
}

#define GPUSCAN_INSTANTIATE_SCAN2D(T, OP)                                                                 \
  template cudaError_t gpuscan::kernels::Scan2D<T, gpuscan::ops::OP<T>>(void*, std::size_t&, const T*, T*, \
                                                                        uint64_t, uint64_t, const T*, cudaStream_t);
