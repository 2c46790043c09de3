// Sorts of 8-byte keys (int64, uint64, double) and the CUB peer for 64-bit codes.
#include "detail/sort_impl.cuh"

GPUSCAN_INSTANTIATE_SORT(int64_t)
GPUSCAN_INSTANTIATE_SORT(uint64_t)
GPUSCAN_INSTANTIATE_SORT(double)
template cudaError_t gpuscan::kernels::SortKeysCub<uint64_t>(void*, std::size_t&, uint64_t*, uint64_t*, uint64_t,
                                                             cudaStream_t);
