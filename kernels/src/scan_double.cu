// Scan for double with every operator of a float type (the CUB peer lives in scan_cub_double.cu).
#include "detail/dispatch.cuh"

GPUSCAN_FOR_ARITH_OPS(GPUSCAN_INSTANTIATE_SCAN, double)
