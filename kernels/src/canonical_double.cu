// The canonical (reproducible) float64 scan: SUM and PRODUCT only (detail/dispatch_canonical.cuh).
#include "detail/dispatch_canonical.cuh"

GPUSCAN_INSTANTIATE_CANONICAL(double, Sum)
GPUSCAN_INSTANTIATE_CANONICAL(double, Product)
