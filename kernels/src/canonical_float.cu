// The canonical (reproducible) float32 scan: SUM and PRODUCT only (detail/dispatch_canonical.cuh).
#include "detail/dispatch_canonical.cuh"

GPUSCAN_INSTANTIATE_CANONICAL(float, Sum)
GPUSCAN_INSTANTIATE_CANONICAL(float, Product)
