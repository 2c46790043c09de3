// Fused segmented scans of uint64_t values, every integer operator, every key kind.
#include "detail/segmented_impl.cuh"

GPUSCAN_FOR_INT_OPS(GPUSCAN_INSTANTIATE_SEGMENTED, uint64_t)
