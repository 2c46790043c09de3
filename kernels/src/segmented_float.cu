// Segmented pair scans for float and double MIN and MAX (exact in any association; float SUM
// and PRODUCT take the canonical tree).
#include "detail/segmented_cub.cuh"

GPUSCAN_INSTANTIATE_SEGMENTED(float, Min)
GPUSCAN_INSTANTIATE_SEGMENTED(float, Max)
GPUSCAN_INSTANTIATE_SEGMENTED(double, Min)
GPUSCAN_INSTANTIATE_SEGMENTED(double, Max)
