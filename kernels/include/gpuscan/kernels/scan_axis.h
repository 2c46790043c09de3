// Scans along one axis of a row-major matrix on the device (issue 47): numpy's
// cumsum(m, axis=1) (every row on its own) and cumsum(m, axis=0) (every column on its own), for
// every operator, inclusive or exclusive. Plain CUDA.
//
// The association is numpy's own: each row (column) is folded strictly left to right (top to
// bottom), out[j] = out[j-1] op x[j], so float bits depend only on the input, never on the
// launch, the chunking or the engine, and equal np.cumsum's (which accumulates in that order).
// Integers and MIN/MAX are exact in any association: their column scans may combine whole tiles
// out of order (decoupled look-back) to keep the GPU busy when the matrix has few columns; float
// SUM/PRODUCT column scans hand each tile's last row to the tile below, in order.
//
// Instantiated for T in {int32_t, int64_t, uint32_t, uint64_t, float, double} with every
// operator of T (ops::Sum ... ops::BitXor; no bitwise ones for floats).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace gpuscan::kernels {

// Scans each of the `rows` rows of the rows x cols matrix d_in into d_out (d_out == d_in is
// allowed: in place). inclusive: out[i][j] = x[i][0] op ... op x[i][j]; exclusive:
// out[i][0] = identity, out[i][j] = x[i][0] op ... op x[i][j-1]. Temp storage CUB's way (d_temp
// null: writes the bytes needed to temp_bytes). Asynchronous in `stream`.
template <class T, class Op>
cudaError_t ScanRows(void* d_temp, std::size_t& temp_bytes, const T* d_in, T* d_out, uint64_t rows, uint64_t cols,
                     bool exclusive, cudaStream_t stream);

// Scans each of the `cols` columns of the rows x cols matrix d_in into d_out (in place allowed),
// continuing d_carry_in (cols elements: each column's inclusive value in the row above these
// rows; null: these rows begin the matrix). inclusive: out[i][j] = carry[j] op x[0][j] op ... op
// x[i][j]; exclusive: out[i][j] = carry[j] op x[0][j] op ... op x[i-1][j] (out[0][j] = carry[j],
// or identity without a carry). d_carry_out (cols elements, nullable, may alias d_carry_in)
// receives each column's inclusive value in the last row (the carry itself when rows == 0), for
// the next band of rows. Temp storage CUB's way. Asynchronous in `stream`.
template <class T, class Op>
cudaError_t ScanColumns(void* d_temp, std::size_t& temp_bytes, const T* d_in, T* d_out, uint64_t rows,
                        uint64_t cols, bool exclusive, const T* d_carry_in, T* d_carry_out, cudaStream_t stream);

}  // namespace gpuscan::kernels
