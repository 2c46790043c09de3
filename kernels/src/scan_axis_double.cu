// Axis scans (ScanRows, ScanColumns) of double with SUM, PRODUCT, MIN and MAX (apart from the
// 8-byte integers so the two compile in parallel).
#include "detail/common.cuh"
#include "detail/scan_axis_impl.cuh"

GPUSCAN_FOR_ARITH_OPS(GPUSCAN_INSTANTIATE_SCAN_AXIS, double)
