// The CUB scan peer for int32_t (every integer operator).
#include "detail/cub_peers.cuh"

GPUSCAN_FOR_INT_OPS(GPUSCAN_INSTANTIATE_CUB_SCAN, int32_t)
