// Segmented pair scans for int64_t and uint64_t, every integer operator.
#include "detail/segmented_cub.cuh"

GPUSCAN_FOR_INT_OPS(GPUSCAN_INSTANTIATE_SEGMENTED, int64_t)
GPUSCAN_FOR_INT_OPS(GPUSCAN_INSTANTIATE_SEGMENTED, uint64_t)
