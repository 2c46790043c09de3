// Compact for the six element types (kernel in detail/agent_compact.cuh).
#include "detail/dispatch.cuh"

GPUSCAN_INSTANTIATE_COMPACT(int32_t)
GPUSCAN_INSTANTIATE_COMPACT(int64_t)
GPUSCAN_INSTANTIATE_COMPACT(uint32_t)
GPUSCAN_INSTANTIATE_COMPACT(uint64_t)
GPUSCAN_INSTANTIATE_COMPACT(float)
GPUSCAN_INSTANTIATE_COMPACT(double)
