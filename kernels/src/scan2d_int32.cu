// 2-D scans of int32_t with every integer operator (the 16-byte and the element kernels; the
// 4-byte types are split over files so their instantiations compile in parallel).
#include "detail/common.cuh"
#include "detail/scan2d_impl.cuh"

GPUSCAN_FOR_INT_OPS(GPUSCAN_INSTANTIATE_SCAN2D, int32_t)
