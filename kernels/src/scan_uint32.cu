// Scan for uint32_t with every operator of an integer type (the CUB peer lives in scan_cub_uint32.cu).
#include "detail/dispatch.cuh"

GPUSCAN_FOR_INT_OPS(GPUSCAN_INSTANTIATE_SCAN, uint32_t)
