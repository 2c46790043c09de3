// Fused segmented scans of float and double MIN and MAX (exact in any association; float SUM
// and PRODUCT take the canonical tree), every key kind.
#include "detail/segmented_impl.cuh"

GPUSCAN_INSTANTIATE_SEGMENTED(float, Min)
GPUSCAN_INSTANTIATE_SEGMENTED(float, Max)
GPUSCAN_INSTANTIATE_SEGMENTED(double, Min)
GPUSCAN_INSTANTIATE_SEGMENTED(double, Max)
