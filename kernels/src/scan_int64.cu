// Scan for int64_t with every operator of an integer type (the CUB peer lives in scan_cub_int64.cu).
#include "detail/dispatch.cuh"

GPUSCAN_FOR_INT_OPS(GPUSCAN_INSTANTIATE_SCAN, int64_t)
