// The canonical (reproducible) float64 scan: SUM and PRODUCT only (kernels in detail/agent_canonical.cuh).
#include "detail/agent_canonical.cuh"

GPUSCAN_INSTANTIATE_CANONICAL(double, Sum)
GPUSCAN_INSTANTIATE_CANONICAL(double, Product)
