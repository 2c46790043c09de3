// Axis scans (ScanRows, ScanColumns) of 8-byte elements: int64_t and uint64_t with every
// integer operator, double with SUM, PRODUCT, MIN and MAX.
#include "detail/common.cuh"
#include "detail/scan_axis_impl.cuh"

GPUSCAN_FOR_INT_OPS(GPUSCAN_INSTANTIATE_SCAN_AXIS, int64_t)
GPUSCAN_FOR_INT_OPS(GPUSCAN_INSTANTIATE_SCAN_AXIS, uint64_t)
GPUSCAN_FOR_ARITH_OPS(GPUSCAN_INSTANTIATE_SCAN_AXIS, double)
