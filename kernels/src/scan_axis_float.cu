// Axis scans (ScanRows, ScanColumns) of float with SUM, PRODUCT, MIN and MAX.
#include "detail/common.cuh"
#include "detail/scan_axis_impl.cuh"

GPUSCAN_FOR_ARITH_OPS(GPUSCAN_INSTANTIATE_SCAN_AXIS, float)
