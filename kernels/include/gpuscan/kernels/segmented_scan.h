// Segmented scans on the device (issue 13): inclusive scans of (head, value) pairs with
// seg::SegOp (see segmented.h for why that is a segmented scan). Plain CUDA.
//
// Instantiated for T in {int32_t, int64_t, uint32_t, uint64_t, float, double} with every
// operator of T (ops::Sum ... ops::BitXor) except float SUM/PRODUCT, whose reproducible scans
// take the canonical tree instead.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "gpuscan/kernels/segmented.h"
#include "gpuscan/kernels/temp_storage.h"

namespace gpuscan::kernels {

// Inclusive scan of n <= 2^30 pairs of d_in into d_out (may alias), continuing *d_carry_in
// (nullable: none) and writing the last result to *d_carry_out (nullable; may alias
// d_carry_in). cub::DeviceScan underneath. Temp storage as temp_storage.h says. Asynchronous.
template <class T, class Op>
cudaError_t SegmentedPairScan(void* d_temp, std::size_t& temp_bytes, const seg::SegItem<T>* d_in,
                              seg::SegItem<T>* d_out, uint64_t n, const seg::SegItem<T>* d_carry_in,
                              seg::SegItem<T>* d_carry_out, cudaStream_t stream);

// The CUB peer of the kernel suite: cub::DeviceScan::InclusiveScanByKey of n <= 2^31 int32
// values under int32 keys (SUM). Temp storage as CUB sizes it (d_temp null: the size query).
cudaError_t SegmentedScanByKeyCub(void* d_temp, std::size_t& temp_bytes, const int32_t* d_keys,
                                  const int32_t* d_values, int32_t* d_out, uint64_t n, cudaStream_t stream);

}  // namespace gpuscan::kernels
