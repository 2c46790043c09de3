// Widening SUM scans of the narrow integers (scan_widen.h): In in {int8, uint8, int16, uint16}
// x Out in {int32, int64, uint32, uint64}. Kernels for the signed outputs only; the unsigned
// ones share them (detail/scan_widen_impl.cuh WidenAcc).
#include "detail/scan_widen_impl.cuh"

#define GPUSCAN_WIDEN_FROM(IN)                     \
  GPUSCAN_INSTANTIATE_SCAN_WIDENING(IN, int32_t)   \
  GPUSCAN_INSTANTIATE_SCAN_WIDENING(IN, int64_t)   \
  GPUSCAN_INSTANTIATE_SCAN_WIDENING(IN, uint32_t)  \
  GPUSCAN_INSTANTIATE_SCAN_WIDENING(IN, uint64_t)

GPUSCAN_WIDEN_FROM(int8_t)
GPUSCAN_WIDEN_FROM(uint8_t)
GPUSCAN_WIDEN_FROM(int16_t)
GPUSCAN_WIDEN_FROM(uint16_t)
