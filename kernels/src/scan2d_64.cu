// 2-D scans of 8-byte elements: int64_t and uint64_t with every integer operator, double with
// SUM, PRODUCT, MIN and MAX.
#include "detail/common.cuh"
#include "detail/scan2d_impl.cuh"

GPUSCAN_FOR_INT_OPS(GPUSCAN_INSTANTIATE_SCAN2D, int64_t)
GPUSCAN_FOR_INT_OPS(GPUSCAN_INSTANTIATE_SCAN2D, uint64_t)
GPUSCAN_FOR_ARITH_OPS(GPUSCAN_INSTANTIATE_SCAN2D, double)
