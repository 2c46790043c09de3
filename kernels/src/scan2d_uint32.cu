// 2-D scans of uint32_t with every integer operator (the 16-byte and the element kernels).
#include "detail/common.cuh"
#include "detail/scan2d_impl.cuh"

GPUSCAN_FOR_INT_OPS(GPUSCAN_INSTANTIATE_SCAN2D, uint32_t)
