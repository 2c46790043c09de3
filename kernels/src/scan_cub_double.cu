// The CUB scan peer for double (every float operator).
#include "detail/cub_peers.cuh"

GPUSCAN_FOR_ARITH_OPS(GPUSCAN_INSTANTIATE_CUB_SCAN, double)
