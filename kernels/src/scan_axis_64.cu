// Axis scans (ScanRows, ScanColumns) of the 8-byte integers, int64_t and uint64_t, with every
// integer operator (double: scan_axis_double.cu).
#include "detail/common.cuh"
#include "detail/scan_axis_impl.cuh"

GPUSCAN_FOR_INT_OPS(GPUSCAN_INSTANTIATE_SCAN_AXIS, int64_t)
GPUSCAN_FOR_INT_OPS(GPUSCAN_INSTANTIATE_SCAN_AXIS, uint64_t)
