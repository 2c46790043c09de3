// The canonical (reproducible) float32 scan: SUM and PRODUCT only (kernels in detail/agent_canonical.cuh).
#include "detail/agent_canonical.cuh"

GPUSCAN_INSTANTIATE_CANONICAL(float, Sum)
GPUSCAN_INSTANTIATE_CANONICAL(float, Product)
