// The CUB scan peer for uint32_t (every integer operator).
#include "detail/cub_peers.cuh"

GPUSCAN_FOR_INT_OPS(GPUSCAN_INSTANTIATE_CUB_SCAN, uint32_t)
