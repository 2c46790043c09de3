// The 2-D scan kernel (gpuscan/kernels/scan2d.h).
//
// A block owns a band of kRows rows and walks it in tiles of kRows x kCols, double-buffered in
// shared memory (cp.async brings tile c+1 while tile c is worked on). Per tile: each thread
// folds one row left to right, continuing the row from the tile before (kept in a register);
// then each thread folds one column top to bottom, starting from the band above's last row at
// that column, which the band above publishes per tile (value, fence, flag). Band ids come from
// an atomic counter, so the band a block waits for was scheduled before it: no deadlock. The
// DRAM traffic is one read and one write of the matrix, plus one row per band of carries.
#pragma once

#include <cuda_pipeline.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "gpuscan/kernels/operators.h"
#include "gpuscan/kernels/scan2d.h"

namespace gpuscan::kernels::scan2d_detail {

constexpr int kThreads = 128;
constexpr int kRows = 128;  // a band's rows: one per thread in the row pass
template <class T>
constexpr int kCols = sizeof(T) == 4 ? 128 : 64;  // a tile's columns: 64 KiB of elements per tile

template <class T>
constexpr std::size_t kTileElems = std::size_t(kRows) * (kCols<T> + 1);  // +1: rows start on other banks

inline std::size_t AlignUp(std::size_t x) { return (x + 255) & ~std::size_t(255); }

template <class T, class Op>
__global__ void __launch_bounds__(kThreads, 1)
    Scan2DKernel(const T* __restrict__ in, T* __restrict__ out, uint64_t rows, uint64_t cols,
                 const T* __restrict__ carry_in, T* band_carry, unsigned* flags, unsigned* counter, unsigned tiles) {
  constexpr int C = kCols<T>;
  using Row = T[C + 1];
  extern __shared__ __align__(16) unsigned char smem[];
  Row* buffers[2] = {reinterpret_cast<Row*>(smem), reinterpret_cast<Row*>(smem) + kRows};
  __shared__ unsigned band_s;
  const int tid = threadIdx.x;
  if (tid == 0) band_s = atomicAdd(counter, 1u);
  __syncthreads();
  const unsigned band = band_s;
  const uint64_t row0 = uint64_t(band) * kRows;
  const int nr = static_cast<int>(min(uint64_t(kRows), rows - row0));
  const Op op;

  auto load = [&](unsigned c) {
    if (c < tiles) {
      Row* t = buffers[c & 1];
      const uint64_t col0 = uint64_t(c) * C;
      const int nc = static_cast<int>(min(uint64_t(C), cols - col0));
      const T* src = in + row0 * cols + col0;
      for (int e = tid; e < nr * C; e += kThreads) {
        const int r = e / C, j = e % C;
        if (j < nc) __pipeline_memcpy_async(&t[r][j], src + uint64_t(r) * cols + j, sizeof(T));
      }
    }
    __pipeline_commit();  // an empty group past the last tile keeps the wait below uniform
  };

  T racc{};  // this thread's row (tid < nr): its fold so far
  load(0);
  for (unsigned c = 0; c < tiles; ++c) {
    Row* t = buffers[c & 1];
    load(c + 1);
    __pipeline_wait_prior(1);  // tile c has landed (for this thread's copies)
    __syncthreads();           // ... and everyone's
    const uint64_t col0 = uint64_t(c) * C;
    const int nc = static_cast<int>(min(uint64_t(C), cols - col0));

    if (tid < nr) {  // rows, left to right
      int j = 0;
      if (c == 0) racc = t[tid][j++];
      for (; j < nc; ++j) t[tid][j] = racc = op(racc, t[tid][j]);
    }
    if (band > 0 && tid == 0) {  // the band above has published this tile's last row
      const volatile unsigned* flag = flags + uint64_t(band - 1) * tiles + c;
      while (*flag == 0) {
      }
      __threadfence();
    }
    __syncthreads();

    if (tid < nc) {  // columns, top to bottom
      const uint64_t col = col0 + tid;
      int r = 0;
      T acc;
      if (band > 0) {
        acc = __ldcg(band_carry + uint64_t(band - 1) * cols + col);  // L2: written by another SM
      } else if (carry_in) {
        acc = carry_in[col];
      } else {
        acc = t[r++][tid];
      }
      for (; r < nr; ++r) t[r][tid] = acc = op(acc, t[r][tid]);
      band_carry[uint64_t(band) * cols + col] = acc;
    }
    __threadfence();
    __syncthreads();
    if (tid == 0) atomicExch(flags + uint64_t(band) * tiles + c, 1u);

    T* dst = out + row0 * cols + col0;
    for (int e = tid; e < nr * C; e += kThreads) {
      const int r = e / C, j = e % C;
      if (j < nc) dst[uint64_t(r) * cols + j] = t[r][j];
    }
    __syncthreads();  // the next iteration's load refills this buffer
  }
}

template <class T, class Op>
cudaError_t Scan2D(void* d_temp, std::size_t& temp_bytes, const T* d_in, T* d_out, uint64_t rows, uint64_t cols,
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
  const std::size_t smem = 2 * kTileElems<T> * sizeof(T);
  auto kernel = Scan2DKernel<T, Op>;
  if (cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem));
      e != cudaSuccess) {
    return e;
  }
  kernel<<<static_cast<unsigned>(bands), kThreads, smem, stream>>>(d_in, d_out, rows, cols, d_carry, band_carry, flags,
                                                                   counter, static_cast<unsigned>(tiles));
  return cudaGetLastError();
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
