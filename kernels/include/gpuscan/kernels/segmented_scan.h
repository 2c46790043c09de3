// Segmented scans on the device (issue 13): one pass that reads values and keys (or head flags)
// and writes values, scanning (head, value) pairs with seg::SegOp, formed as each tile is read
// (see segmented.h for why that is a segmented scan). Plain CUDA.
//
// Instantiated for T in {int32_t, int64_t, uint32_t, uint64_t, float, double} with every
// operator of T (ops::Sum ... ops::BitXor) except float SUM/PRODUCT, whose reproducible scans
// take the canonical tree instead; K in {uint32_t, uint64_t, uint8_t}.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "gpuscan/kernels/segmented.h"
#include "gpuscan/kernels/temp_storage.h"

namespace gpuscan::kernels {

// What a segmented scan carries from one call to the next (device memory).
template <class T>
struct SegmentCarry {
  seg::SegItem<T> item;  // the inclusive result at the last element so far
  uint64_t last_key;     // that element's key bits (keys mode)
  uint64_t started;      // nonzero once any element was scanned
};

// Segmented scan of n values of d_values into d_out (may alias d_values). Segments: runs of
// equal consecutive keys (K = uint32_t or uint64_t, a key's bits: signed keys pass as their
// unsigned bits) or elements whose head byte is nonzero (K = uint8_t). Inclusive, or exclusive
// (the identity at each segment's first element). Continues *d_carry_in (nullable: the array
// starts here, its first element opens a segment) and writes *d_carry_out (nullable; may alias
// d_carry_in). Temp storage as temp_storage.h says. Asynchronous.
template <class T, class Op, class K>
cudaError_t SegmentedScan(void* d_temp, std::size_t& temp_bytes, const T* d_values, const K* d_keys, T* d_out,
                          uint64_t n, bool exclusive, const SegmentCarry<T>* d_carry_in,
                          SegmentCarry<T>* d_carry_out, cudaStream_t stream);

// The CUB peer of the kernel suite: cub::DeviceScan::InclusiveScanByKey of n <= 2^31 int32
// values under int32 keys (SUM). Temp storage as CUB sizes it (d_temp null: the size query).
cudaError_t SegmentedScanByKeyCub(void* d_temp, std::size_t& temp_bytes, const int32_t* d_keys,
                                  const int32_t* d_values, int32_t* d_out, uint64_t n, cudaStream_t stream);

}  // namespace gpuscan::kernels
