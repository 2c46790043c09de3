// Device-wide reduction (gpuscan::kernels). Instantiated for the same (T, Op) pairs as Scan.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "gpuscan/kernels/operators.h"
#include "gpuscan/kernels/temp_storage.h"

namespace gpuscan::kernels {

// *d_out = carry op x[0] op ... op x[n-1], carry = *d_carry_in or Op::identity() when
// d_carry_in is nullptr (d_out may alias d_carry_in). use_cub: cub::DeviceReduce::Reduce as
// the peer; otherwise one pass (per-block partials, then the last block to finish combines
// them). Deterministic: the association order depends only on n, so the same input gives
// bit-identical floats on every run and every GPU model. Asynchronous on `stream`.
template <class T, class Op>
cudaError_t Reduce(bool use_cub, void* d_temp, std::size_t& temp_bytes, const T* d_in, uint64_t n,
                   const T* d_carry_in, T* d_out, cudaStream_t stream);

}  // namespace gpuscan::kernels
