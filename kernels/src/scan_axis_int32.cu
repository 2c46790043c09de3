// Axis scans (ScanRows, ScanColumns) of int32_t with every integer operator (the 4-byte and
// 8-byte types are split over files so their instantiations compile in parallel).
#include "detail/common.cuh"
#include "detail/scan_axis_impl.cuh"

GPUSCAN_FOR_INT_OPS(GPUSCAN_INSTANTIATE_SCAN_AXIS, int32_t)
