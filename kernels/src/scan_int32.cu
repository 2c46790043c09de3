// Scan for int32_t with every operator of an integer type (the CUB peer lives in scan_cub_int32.cu).
#include "detail/dispatch.cuh"

GPUSCAN_FOR_INT_OPS(GPUSCAN_INSTANTIATE_SCAN, int32_t)
