// 2-D scans of 4-byte elements: int32_t and uint32_t with every integer operator, float with
// SUM, PRODUCT, MIN and MAX.
#include "detail/common.cuh"
#include "detail/scan2d_impl.cuh"

GPUSCAN_FOR_INT_OPS(GPUSCAN_INSTANTIATE_SCAN2D, int32_t)
GPUSCAN_FOR_INT_OPS(GPUSCAN_INSTANTIATE_SCAN2D, uint32_t)
GPUSCAN_FOR_ARITH_OPS(GPUSCAN_INSTANTIATE_SCAN2D, float)
