#pragma once
// The 2-D scan kernel (gpuscan/kernels/scan2d.h).
//
// A block owns a band of kRows rows and walks it in tiles of kRows x kCols held in shared
// memory. Its two halves work as a pipeline, one tile apart: the row half (a thread per row)
// folds tile s left to right, continuing each row from the tile before (kept in a register),
// while the column half (a thread per column) folds tile s-1 top to bottom from the band
// above's last row at those columns, publishes the band's own last row (value, fence, flag) for
// the band below, and writes the tile out. Tile s+1 arrives meanwhile by cp.async (three
// buffers). Band ids come from an atomic counter, so the band a block waits for was scheduled
// before it: no deadlock. DRAM traffic: one read and one write of the matrix, plus one row per
// band of carries.


#include <cuda_pipeline.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "gpuscan/kernels/operators.h"
#include "gpuscan/kernels/scan2d.h"

namespace old2d {

constexpr int kRows = 128;              // a band's rows: one per thread of the row half
constexpr int kThreads = 2 * kRows;     // the row half, then the column half
constexpr int kBuffers = 3;             // row half's tile, column half's tile, the next tile in flight
template <class T>
constexpr int kCols = sizeof(T) == 4 ? 128 : 64;  // a tile's columns: 512 bytes of a row

template <class T>
constexpr std::size_t kTileElems = std::size_t(kRows) * (kCols<T> + 1);  // +1: rows start on other banks

inline std::size_t AlignUp(std::size_t x) { return (x + 255) & ~std::size_t(255); }

__device__ __forceinline__ void ColumnHalfBarrier() { asm volatile("bar.sync 1, %0;" ::"n"(kRows)); }

template <class T, class Op, bool kWords>
__global__ void __launch_bounds__(kThreads, 1)
    Scan2DKernel(const T* __restrict__ in, T* __restrict__ out, uint64_t rows, uint64_t cols,
                 const T* __restrict__ carry_in, T* band_carry, unsigned* flags, unsigned* counter, unsigned tiles) {
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
      gpuscan::kernels::detail::TileWord* words = reinterpret_cast<gpuscan::kernels::detail::TileWord*>(band_carry);
      if (!kWords) {
      if (band > 0 && k == 0) {  // the band above has published this tile's last row
        const volatile unsigned* flag = flags + uint64_t(band - 1) * tiles + c;
        while (*flag == 0) {
        }
        __threadfence();
      }
      ColumnHalfBarrier();
      }
      const uint64_t col0 = uint64_t(c) * C;
      if (k < nc) {
        const uint64_t col = col0 + k;
        int r = 0;
        T acc;
        if (band > 0 && kWords) {
          unsigned long long status, bits;
          do {
            gpuscan::kernels::detail::LoadTileWord(words + uint64_t((band + 1u) & 1u) * cols + col, status, bits);
          } while (status != band);
          acc = gpuscan::kernels::detail::FromBits<T>(bits);
        } else if (band > 0) {
          acc = __ldcg(band_carry + uint64_t(band - 1) * cols + col);  // L2: written by another SM
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
        if (kWords) {
          gpuscan::kernels::detail::StoreTileWord(words + uint64_t(band & 1u) * cols + col, band + 1ull, gpuscan::kernels::detail::ToBits(acc));
        } else {
          band_carry[uint64_t(band) * cols + col] = acc;
        }
      }
      if (!kWords) {
      __threadfence();
      ColumnHalfBarrier();
      if (k == 0) atomicExch(flags + uint64_t(band) * tiles + c, 1u);
      } else {
      ColumnHalfBarrier();
      }
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

template <class T, class Op, bool kWords = false>
cudaError_t Launch(void* d_temp, std::size_t& temp_bytes, const T* d_in, T* d_out, uint64_t rows, uint64_t cols,
                   const T* d_carry, cudaStream_t stream) {
  const uint64_t bands = (rows + kRows - 1) / kRows;
  const uint64_t tiles = (cols + kCols<T> - 1) / kCols<T>;
  if (bands > 0xffffffffull || tiles > 0xffffffffull) return cudaErrorInvalidValue;
  const std::size_t flag_bytes = AlignUp(bands * tiles * sizeof(unsigned) + sizeof(unsigned));
  const std::size_t needed = flag_bytes + AlignUp(bands * cols * sizeof(T)) + 256;
  if (!d_temp) {
    temp_bytes = needed;
    return cudaSuccess;
  }
  if (temp_bytes < needed) return cudaErrorInvalidValue;
  if (rows == 0 || cols == 0) return cudaSuccess;
  auto* base = reinterpret_cast<unsigned char*>(AlignUp(reinterpret_cast<std::size_t>(d_temp)));
  auto* counter = reinterpret_cast<unsigned*>(base);
  unsigned* flags = counter + 1;
  T* band_carry = reinterpret_cast<T*>(base + flag_bytes);
  if (cudaError_t e = cudaMemsetAsync(base, 0, flag_bytes, stream); e != cudaSuccess) return e;
  if (kWords) { if (cudaError_t e = cudaMemsetAsync(band_carry, 0, 2 * cols * 16, stream); e != cudaSuccess) return e; }
  const std::size_t smem = kBuffers * kTileElems<T> * sizeof(T);
  auto kernel = Scan2DKernel<T, Op, kWords>;
  if (cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem));
      e != cudaSuccess) {
    return e;
  }
  kernel<<<static_cast<unsigned>(bands), kThreads, smem, stream>>>(d_in, d_out, rows, cols, d_carry, band_carry, flags,
                                                                   counter, static_cast<unsigned>(tiles));
  return cudaGetLastError();
}

template <class T, class Op>
cudaError_t Scan2D(void* d_temp, std::size_t& temp_bytes, const T* d_in, T* d_out, uint64_t rows, uint64_t cols,
                   const T* d_carry, cudaStream_t stream) {
  return Launch<T, Op>(d_temp, temp_bytes, d_in, d_out, rows, cols, d_carry, stream);
}

}  // namespace

// The 2-D scan kernel (gpuscan/kernels/scan2d.h).
//
// A block owns a band of kRows rows and walks it in tiles of kRows rows x 512 bytes held in
// shared memory. Its two halves work as a pipeline, one tile apart: the row half (a thread per
// row) folds tile s left to right, continuing each row from the tile before (kept in a
// register), while the column half (a thread per column) folds tile s-1 top to bottom from the
// band above's last row at that column, publishes the band's own last row for the band below,
// and writes the tile out. Tile s+1 arrives meanwhile by cp.async (three buffers). Band ids
// come from an atomic counter, so the band a block waits for was scheduled before it: no
// deadlock. DRAM traffic: one read and one write of the matrix.
//
// The hand-off is per column and needs no fence: a column's last value travels with its band's
// token in one 16-byte word (tile_state.cuh's relaxed 128-bit store), so a column thread of the
// band below waits for its own word only. Two rows of words suffice (bands b-1 and b+1 share
// one): band b+1 writes a column only after band b has published it, which band b does only
// after reading band b-1's.
//
// Shared memory holds a tile's rows unpadded, its 16-byte groups swizzled (group g of row r at
// g ^ (r & 7)), so the row half reads a row 16 bytes at a time, the column half reads a row
// across 32 columns, and the copies move 16-byte groups, all without bank conflicts.


#include <cuda_pipeline.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "gpuscan/kernels/operators.h"
#include "gpuscan/kernels/scan2d.h"
#include "tile_state.cuh"

namespace new2d {
namespace detail = gpuscan::kernels::detail;

using detail::TileWord;

constexpr int kRows = 128;           // a band's rows: one per thread of the row half
constexpr int kThreads = 2 * kRows;  // the row half, then the column half
constexpr int kBuffers = 3;          // row half's tile, column half's tile, the next tile in flight
template <class T>
constexpr int kCols = 512 / int(sizeof(T));  // a tile's columns: 512 bytes of a row
template <class T>
constexpr int kVec = 16 / int(sizeof(T));  // elements in a 16-byte group
template <class T>
constexpr int kGroups = kCols<T> / kVec<T>;  // 32 groups a tile row
static_assert(kGroups<float> == 32 && kGroups<double> == 32, "a tile row is one warp's 16-byte groups");

template <class T>
constexpr std::size_t kTileElems = std::size_t(kRows) * kCols<T>;

template <class T>
struct alignas(16) Group {
  T x[kVec<T>];
};

inline std::size_t AlignUp(std::size_t x) { return (x + 255) & ~std::size_t(255); }

// Where group g of row r sits in a tile buffer (in groups).
__device__ __forceinline__ int Slot(int r, int g) { return r * 32 + (g ^ (r & 7)); }

template <class T, class Op, bool kPerBand, int kSleep, bool kVL, bool kVS, bool kVR, bool kFlag>
__global__ void __launch_bounds__(kThreads, 1)
    Scan2DKernel(const T* __restrict__ in, T* __restrict__ out, uint64_t rows, uint64_t cols,
                 const T* __restrict__ carry_in, TileWord* words, unsigned* counter, unsigned tiles, bool vec) {
  constexpr int C = kCols<T>, V = kVec<T>;
  using G = Group<T>;
  extern __shared__ __align__(16) unsigned char smem[];
  auto buffer = [&](unsigned c) { return reinterpret_cast<G*>(smem) + (c % kBuffers) * (kRows * 32); };
  auto at = [&](G* t, int r, int j) -> T& { return t[Slot(r, j / V)].x[j % V]; };
  __shared__ unsigned band_s;
  const int tid = threadIdx.x;
  if (tid == 0) band_s = atomicAdd(counter, 1u);
  __syncthreads();
  const unsigned band = band_s;
  const uint64_t row0 = uint64_t(band) * kRows;
  const int nr = static_cast<int>(min(uint64_t(kRows), rows - row0));
  const Op op;
  auto width = [&](unsigned c) { return static_cast<int>(min(uint64_t(C), cols - uint64_t(c) * C)); };
  // The band's words, and the band above's (two rows, alternating).
  TileWord* mine = words + uint64_t(kPerBand ? band : (band & 1u)) * cols;
  const TileWord* above = words + uint64_t(kPerBand ? band - 1 : ((band + 1u) & 1u)) * cols;

  // Copies tile c into its buffer with every thread (cp.async: no registers held while the
  // copies fly). A full tile of a vector matrix moves 16-byte groups, kThreads / 32 rows a step.
  auto load = [&](unsigned c) {
    if (c < tiles) {
      G* t = buffer(c);
      const int nc = width(c);
      const T* src = in + row0 * cols + uint64_t(c) * C;
      if (kVL && vec && nr == kRows && nc == C) {
        constexpr int kStep = kThreads / 32;
        const int r0 = tid / 32, g = tid % 32;
#pragma unroll
        for (int r = r0; r < kRows; r += kStep) {
          __pipeline_memcpy_async(&t[Slot(r, g)], src + uint64_t(r) * cols + g * V, 16);
        }
      } else {
        for (int e = tid; e < nr * C; e += kThreads) {
          const int r = e / C, j = e % C;
          if (j < nc) __pipeline_memcpy_async(&at(t, r, j), src + uint64_t(r) * cols + j, sizeof(T));
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
        G* t = buffer(s);
        const int nc = width(s);
        if (kVR && s > 0 && nc == C) {  // 16 bytes at a time; constant trip counts
#pragma unroll 8
          for (int g = 0; g < 32; ++g) {
            G v = t[Slot(tid, g)];
#pragma unroll
            for (int e = 0; e < V; ++e) v.x[e] = racc = op(racc, v.x[e]);
            t[Slot(tid, g)] = v;
          }
        } else {
          int j = 0;
          if (s == 0) racc = at(t, tid, j++);  // the row's first element as it is (no identity: -0.0)
          for (; j < nc; ++j) at(t, tid, j) = racc = op(racc, at(t, tid, j));
        }
      }
    } else if (s > 0) {  // the column half: tile s-1, columns top to bottom, then out
      const unsigned c = s - 1;
      G* t = buffer(c);
      const int nc = width(c), k = tid - kRows;
      const uint64_t col0 = uint64_t(c) * C;
      if constexpr (kFlag) {
        T* band_carry = reinterpret_cast<T*>(words);
        unsigned* flags = reinterpret_cast<unsigned*>(reinterpret_cast<char*>(words) + (32 << 20));
        if (band > 0 && k == 0) {
          const volatile unsigned* flag = flags + uint64_t(band - 1) * tiles + c;
          while (*flag == 0) {
          }
          __threadfence();
        }
        asm volatile("bar.sync 1, %0;" ::"n"(kRows));
        if (k < nc) {
          const uint64_t col = col0 + k;
          const int kg = k / V, ke = k % V;
          int r = 0;
          T acc;
          if (band > 0) {
            acc = __ldcg(band_carry + uint64_t(band - 1) * cols + col);
          } else if (carry_in) {
            acc = carry_in[col];
          } else {
            acc = t[Slot(0, kg)].x[ke];
            r = 1;
          }
          if (r == 0 && nr == kRows) {
#pragma unroll 32
            for (int i = 0; i < kRows; ++i) {
              T& x = t[i * 32 + (kg ^ (i & 7))].x[ke];
              x = acc = op(acc, x);
            }
          } else {
            for (; r < nr; ++r) {
              T& x = t[Slot(r, kg)].x[ke];
              x = acc = op(acc, x);
            }
          }
          band_carry[uint64_t(band) * cols + col] = acc;
        }
        __threadfence();
        asm volatile("bar.sync 1, %0;" ::"n"(kRows));
        if (k == 0) atomicExch(flags + uint64_t(band) * tiles + c, 1u);
      } else {
      if (k < nc) {
        const uint64_t col = col0 + k;
        // Row r of column k in the buffer: the group's slot depends on r & 7 only.
        const int kg = k / V, ke = k % V;
        int r = 0;
        T acc;
        if (band > 0) {  // the band above's last row at this column, once it is there
          unsigned long long status, bits;
          do {
            detail::LoadTileWord(above + col, status, bits);
            if (kSleep > 0 && status != band) __nanosleep(kSleep);
          } while (status != band);
          acc = detail::FromBits<T>(bits);
        } else if (carry_in) {
          acc = carry_in[col];
        } else {
          acc = t[Slot(0, kg)].x[ke];
          r = 1;
        }
        if (r == 0 && nr == kRows) {
#pragma unroll 32
          for (int i = 0; i < kRows; ++i) {
            T& x = t[i * 32 + (kg ^ (i & 7))].x[ke];
            x = acc = op(acc, x);
          }
        } else {
          for (; r < nr; ++r) {
            T& x = t[Slot(r, kg)].x[ke];
            x = acc = op(acc, x);
          }
        }
        detail::StoreTileWord(mine + col, band + 1ull, detail::ToBits(acc));
      }
      asm volatile("bar.sync 1, %0;" ::"n"(kRows));  // the column half's folds are in the buffer
      }
      T* dst = out + row0 * cols + col0;
      if (kVS && vec && nr == kRows && nc == C) {
        constexpr int kStep = kRows / 32;
        const int r0 = k / 32, g = k % 32;
#pragma unroll 8
        for (int r = r0; r < kRows; r += kStep) *reinterpret_cast<G*>(dst + uint64_t(r) * cols + g * V) = t[Slot(r, g)];
      } else {
        for (int e = k; e < nr * C; e += kRows) {
          const int r = e / C, j = e % C;
          if (j < nc) dst[uint64_t(r) * cols + j] = at(t, r, j);
        }
      }
    }
    __syncthreads();  // the next iteration's load refills tile s-1's buffer
  }
}

template <class T, class Op, bool kPerBand = false, int kSleep = 0, bool kVL = true, bool kVS = true, bool kVR = true, bool kFlag = false>
cudaError_t Launch(void* d_temp, std::size_t& temp_bytes, const T* d_in, T* d_out, uint64_t rows, uint64_t cols,
                   const T* d_carry, cudaStream_t stream) {
  const uint64_t bands = (rows + kRows - 1) / kRows;
  const uint64_t tiles = (cols + kCols<T> - 1) / kCols<T>;
  if (bands >= 0xffffffffull || tiles > 0xffffffffull) return cudaErrorInvalidValue;
  // The band counter, then two rows of hand-off words: zeroed each call (a word's token is its
  // band + 1, so a zero never reads as published).
  const std::size_t needed = 256 + AlignUp((kPerBand ? bands : 2) * cols * sizeof(TileWord)) + 256;
  if (!d_temp) {
    temp_bytes = needed;
    return cudaSuccess;
  }
  if (temp_bytes < needed) return cudaErrorInvalidValue;
  if (rows == 0 || cols == 0) return cudaSuccess;
  auto* base = reinterpret_cast<unsigned char*>(AlignUp(reinterpret_cast<std::size_t>(d_temp)));
  auto* counter = reinterpret_cast<unsigned*>(base);
  auto* words = reinterpret_cast<TileWord*>(base + 256);
  if (kFlag) {
    if (cudaError_t e = cudaMemsetAsync(base, 0, 256, stream); e != cudaSuccess) return e;
    if (cudaError_t e = cudaMemsetAsync(base + 256 + (32 << 20), 0, bands * tiles * 4, stream); e != cudaSuccess) return e;
  } else
  if (cudaError_t e = cudaMemsetAsync(base, 0, needed - 256, stream); e != cudaSuccess) return e;
  const std::size_t smem = kBuffers * kTileElems<T> * sizeof(T);
  auto kernel = Scan2DKernel<T, Op, kPerBand, kSleep, kVL, kVS, kVR, kFlag>;
  if (cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem));
      e != cudaSuccess) {
    return e;
  }
  // 16-byte groups: whole groups per row, both matrices 16-byte aligned.
  const bool vec = cols % kVec<T> == 0 && reinterpret_cast<std::uintptr_t>(d_in) % 16 == 0 &&
                   reinterpret_cast<std::uintptr_t>(d_out) % 16 == 0;
  kernel<<<static_cast<unsigned>(bands), kThreads, smem, stream>>>(d_in, d_out, rows, cols, d_carry, words, counter,
                                                                   static_cast<unsigned>(tiles), vec);
  return cudaGetLastError();
}

template <class T, class Op>
cudaError_t Scan2D(void* d_temp, std::size_t& temp_bytes, const T* d_in, T* d_out, uint64_t rows, uint64_t cols,
                   const T* d_carry, cudaStream_t stream) {
  return Launch<T, Op>(d_temp, temp_bytes, d_in, d_out, rows, cols, d_carry, stream);
}

}  // namespace
