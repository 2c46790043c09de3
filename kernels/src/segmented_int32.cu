// Segmented pair scans for int32_t and uint32_t, every integer operator.
#include "detail/segmented_cub.cuh"

GPUSCAN_FOR_INT_OPS(GPUSCAN_INSTANTIATE_SEGMENTED, int32_t)
GPUSCAN_FOR_INT_OPS(GPUSCAN_INSTANTIATE_SEGMENTED, uint32_t)
