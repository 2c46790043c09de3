// The 2-D scan kernel (gpuscan/kernels/scan2d.h).
//
// A block owns a band of kRows rows and walks it in tiles of kRows x kCols held in shared
// memory. Its two halves work as a pipeline, one tile apart: the row half (a thread per row)
// folds tile s left to right, continuing each row from the tile before (kept in a register),
// while the column half (a thread per column) folds tile s-1 top to bottom from the band
// above's last row at those columns, publishes the band's own last row for the band below, and
// writes the tile out. Tile s+1 arrives meanwhile by cp.async (three buffers). Band ids come
// from an atomic counter, so the band a block waits for was scheduled before it: no deadlock.
// DRAM traffic: one read and one write of the matrix.
//
// The hand-off is per column and needs no fence: a column's last value travels with its band's
// token in one 16-byte word (tile_state.cuh's relaxed 128-bit store), so each column thread of
// the band below waits for its own word only (a flag per tile needed a fence of every column
// thread and a barrier on both sides: 64% -> 71% of copy, bench/NOTES.md). Two rows of words
// serve all bands: band b + 1 writes row (b + 1) % 2 at a column only after band b published
// that column, which band b does only after reading band b - 1's word there.
#pragma once

#include <cuda_pipeline.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "gpuscan/kernels/operators.h"
#include "gpuscan/kernels/scan2d.h"
#include "tile_state.cuh"

namespace gpuscan::kernels::scan2d_detail {

using detail::TileWord;

constexpr int kRows = 128;              // a band's rows: one per thread of the row half
constexpr int kThreads = 2 * kRows;     // the row half, then the column half
constexpr int kBuffers = 3;             // row half's tile, column half's tile, the next tile in flight
template <class T>
constexpr int kCols = sizeof(T) == 4 ? 128 : 64;  // a tile's columns: 512 bytes of a row

template <class T>
constexpr std::size_t kTileElems = std::size_t(kRows) * (kCols<T> + 1);  // +1: rows start on other banks

inline std::size_t AlignUp(std::size_t x) { return (x + 255) & ~std::size_t(255); }

__device__ __forceinline__ void ColumnHalfBarrier() { asm volatile("bar.sync 1, %0;" ::"n"(kRows)); }

template <class T, class Op>
__global__ void __launch_bounds__(kThreads, 1)
    Scan2DKernel(const T* __restrict__ in, T* __restrict__ out, uint64_t rows, uint64_t cols,
                 const T* __restrict__ carry_in, TileWord* words, unsigned* counter, unsigned tiles) {
  constexpr int C = kCols<T>;
  using Row = T[C + 1];
  extern __shared__ __align__(16) unsigned char smem[];
  auto buffer = [&](unsigned c) { return reinterpret_cast<Row*>(smem) + (c % kBuffers) * kRows; };
  __shared__ unsigned band_s;
  const int tid = threadIdx.x;
  if (tid == 0) band_s = atomicAdd(counter, 1u);
  __syncthreads();
  const unsigned band = band_s;
  const uint64_t row0 = uint64_t(band) * kRows;
  const int nr = static_cast<int>(min(uint64_t(kRows), rows - row0));
  const Op op;
  auto width = [&](unsigned c) { return static_cast<int>(min(uint64_t(C), cols - uint64_t(c) * C)); };
  TileWord* mine = words + uint64_t(band & 1u) * cols;                 // this band's last row
  const TileWord* above = words + uint64_t((band + 1u) & 1u) * cols;  // the band above's

  // Copies tile c into its buffer with every thread (cp.async: no registers held while the
  // copies fly). A full tile takes the unrolled path: kThreads / C rows per step.
  auto load = [&](unsigned c) {
    if (c < tiles) {
      Row* t = buffer(c);
      const int nc = width(c);
      const T* src = in + row0 * cols + uint64_t(c) * C;
      if (nr == kRows && nc == C) {
        constexpr int kStep = kThreads / C;
        const int r0 = tid / C, j = tid % C;
#pragma unroll 16
        for (int r = r0; r < kRows; r += kStep) __pipeline_memcpy_async(&t[r][j], src + uint64_t(r) * cols + j, sizeof(T));
      } else {
        for (int e = tid; e < nr * C; e += kThreads) {
          const int r = e / C, j = e % C;
          if (j < nc) __pipeline_memcpy_async(&t[r][j], src + uint64_t(r) * cols + j, sizeof(T));
        }
      }
    }
    __pipeline_commit();  // an empty group past the last tile keeps the wait below uniform
  };

  T racc{};  // the row half: this thread's row (tid < nr), its fold so far
  load(0);
  for (unsigned s = 0; s <= tiles; ++s) {
    load(s + 1);               // into the buffer tile s-2 left
    __pipeline_wait_prior(1);  // tile s has landed (this thread's copies)
    __syncthreads();           // ... everyone's, and tile s-1's row folds are done

    if (tid < kRows) {  // the row half: tile s, rows left to right
      if (s < tiles && tid < nr) {
        T* row = buffer(s)[tid];
        const int nc = width(s);
        if (s > 0 && nc == C) {  // constant trip count: the loads run ahead of the fold
#pragma unroll 32
          for (int j = 0; j < C; ++j) row[j] = racc = op(racc, row[j]);
        } else {
          int j = 0;
          if (s == 0) racc = row[j++];
          for (; j < nc; ++j) row[j] = racc = op(racc, row[j]);
        }
      }
    } else if (s > 0) {  // the column half: tile s-1, columns top to bottom, then out
      const unsigned c = s - 1;
      Row* t = buffer(c);
      const int nc = width(c), k = tid - kRows;
      const uint64_t col0 = uint64_t(c) * C;
      if (k < nc) {
        const uint64_t col = col0 + k;
        int r = 0;
        T acc;
        if (band > 0) {  // the band above's last row at this column, once it is there
          unsigned long long status, bits;
          do {
            detail::LoadTileWord(above + col, status, bits);
          } while (status != band);
          acc = detail::FromBits<T>(bits);
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
        detail::StoreTileWord(mine + col, band + 1ull, detail::ToBits(acc));  // token: band + 1
      }
      ColumnHalfBarrier();  // every column's fold is in the buffer
      T* dst = out + row0 * cols + col0;
      if (nr == kRows && nc == C) {
        constexpr int kStep = kRows / C;
        const int r0 = k / C, j = k % C;
#pragma unroll 16
        for (int r = r0; r < kRows; r += kStep) dst[uint64_t(r) * cols + j] = t[r][j];
      } else {
        for (int e = k; e < nr * C; e += kRows) {
          const int r = e / C, j = e % C;
          if (j < nc) dst[uint64_t(r) * cols + j] = t[r][j];
        }
      }
    }
    __syncthreads();  // the next iteration's load refills tile s-1's buffer
  }
}

template <class T, class Op>
cudaError_t Launch(void* d_temp, std::size_t& temp_bytes, const T* d_in, T* d_out, uint64_t rows, uint64_t cols,
                   const T* d_carry, cudaStream_t stream) {
  const uint64_t bands = (rows + kRows - 1) / kRows;
  const uint64_t tiles = (cols + kCols<T> - 1) / kCols<T>;
  if (bands >= 0xffffffffull || tiles > 0xffffffffull) return cudaErrorInvalidValue;
  // The band counter, then two rows of hand-off words, zeroed each call (a word's token is its
  // band + 1: a zero never reads as published).
  const std::size_t zeroed = 256 + AlignUp(2 * cols * sizeof(TileWord));
  const std::size_t needed = zeroed + 256;
  if (!d_temp) {
    temp_bytes = needed;
    return cudaSuccess;
  }
  if (temp_bytes < needed) return cudaErrorInvalidValue;
  if (rows == 0 || cols == 0) return cudaSuccess;
  auto* base = reinterpret_cast<unsigned char*>(AlignUp(reinterpret_cast<std::size_t>(d_temp)));
  auto* counter = reinterpret_cast<unsigned*>(base);
  auto* words = reinterpret_cast<TileWord*>(base + 256);
  if (cudaError_t e = cudaMemsetAsync(base, 0, zeroed, stream); e != cudaSuccess) return e;
  const std::size_t smem = kBuffers * kTileElems<T> * sizeof(T);
  auto kernel = Scan2DKernel<T, Op>;
  if (cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem));
      e != cudaSuccess) {
    return e;
  }
  kernel<<<static_cast<unsigned>(bands), kThreads, smem, stream>>>(d_in, d_out, rows, cols, d_carry, words, counter,
                                                                   static_cast<unsigned>(tiles));
  return cudaGetLastError();
}

template <class T, class Op>
cudaError_t Scan2D(void* d_temp, std::size_t& temp_bytes, const T* d_in, T* d_out, uint64_t rows, uint64_t cols,
                   const T* d_carry, cudaStream_t stream) {
  return Launch<T, Op>(d_temp, temp_bytes, d_in, d_out, rows, cols, d_carry, stream);
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
