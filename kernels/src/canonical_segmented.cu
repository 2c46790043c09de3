// The canonical tree over float32 (head, value) pairs, SUM and PRODUCT: reproducible segmented
// scans (gpuscan/kernels/segmented.h). float64 pairs (16 bytes) would need more static shared
// memory than a block may have, so the engine runs those on the host.
#include "detail/dispatch_canonical.cuh"
#include "gpuscan/kernels/segmented.h"

#define GPUSCAN_INSTANTIATE_CANONICAL_PAIRS(T, OP)                                                \
  template cudaError_t                                                                            \
  gpuscan::kernels::CanonicalScan<gpuscan::seg::SegItem<T>, gpuscan::seg::SegOp<T, gpuscan::ops::OP<T>>>( \
      void*, std::size_t&, const gpuscan::seg::SegItem<T>*, gpuscan::seg::SegItem<T>*, uint64_t, uint64_t, bool, \
      gpuscan::kernels::CanonicalState<gpuscan::seg::SegItem<T>>*, cudaStream_t);

GPUSCAN_INSTANTIATE_CANONICAL_PAIRS(float, Sum)
GPUSCAN_INSTANTIATE_CANONICAL_PAIRS(float, Product)
