// 2-D scans of float with SUM, PRODUCT, MIN and MAX (the 16-byte and the element kernels).
#include "detail/common.cuh"
#include "detail/scan2d_impl.cuh"

GPUSCAN_FOR_ARITH_OPS(GPUSCAN_INSTANTIATE_SCAN2D, float)
