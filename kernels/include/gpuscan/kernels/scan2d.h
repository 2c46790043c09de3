// 2-D inclusive scans (summed-area tables) on the device (issue 13). Plain CUDA.
//
// out[i][j] = r[i][j] for the table's first row, else out[i-1][j] op r[i][j], where
// r[i][j] = r[i][j-1] op x[i][j] folds row i left to right: the association is fixed by the
// positions alone, so float bits never depend on the launch, and the CPU engine's double loop
// gives the same ones.
//
// Instantiated for T in {int32_t, int64_t, uint32_t, uint64_t, float, double} with every
// operator of T (ops::Sum ... ops::BitXor; no bitwise ones for floats).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace gpuscan::kernels {

// Scans the rows x cols row-major matrix d_in into d_out (no aliasing), continuing d_carry
// (cols elements: the last row of the table's earlier rows; null: these rows begin the table).
// One pass over tiles taken in anti-diagonal order: each tile continues its rows from the tile to
// its left and its columns from the tile above. Temp storage CUB's way (d_temp null: writes the
// bytes needed to temp_bytes); it needs no zeroing and is its own (not temp_storage.h's shared
// buffer). Asynchronous in `stream`.
template <class T, class Op>
cudaError_t Scan2D(void* d_temp, std::size_t& temp_bytes, const T* d_in, T* d_out, uint64_t rows, uint64_t cols,
                   const T* d_carry, cudaStream_t stream);

}  // namespace gpuscan::kernels
