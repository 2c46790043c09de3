// The widening float16 -> float32 SUM scan (scan_widen.h): the canonical tree, reproducible.
#include "detail/scan_widen_impl.cuh"

GPUSCAN_INSTANTIATE_SCAN_WIDENING(gpuscan::kernels::Float16, float)
