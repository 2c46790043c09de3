// The histogram kernel for all six element types (kernel in detail/agent_histogram.cuh).
#include "detail/agent_histogram.cuh"

GPUSCAN_INSTANTIATE_HISTOGRAM(int32_t)
GPUSCAN_INSTANTIATE_HISTOGRAM(int64_t)
GPUSCAN_INSTANTIATE_HISTOGRAM(uint32_t)
GPUSCAN_INSTANTIATE_HISTOGRAM(uint64_t)
GPUSCAN_INSTANTIATE_HISTOGRAM(float)
GPUSCAN_INSTANTIATE_HISTOGRAM(double)
