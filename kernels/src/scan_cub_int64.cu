// The CUB scan peer for int64_t (every integer operator).
#include "detail/cub_peers.cuh"

GPUSCAN_FOR_INT_OPS(GPUSCAN_INSTANTIATE_CUB_SCAN, int64_t)
