// Axis scans (ScanRows, ScanColumns) of uint32_t with every integer operator.
#include "detail/common.cuh"
#include "detail/scan_axis_impl.cuh"

GPUSCAN_FOR_INT_OPS(GPUSCAN_INSTANTIATE_SCAN_AXIS, uint32_t)
