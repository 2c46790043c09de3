// Fused reduce by key of 4-byte values: int32_t and uint32_t with every integer operator, float
// MIN and MAX; 4- and 8-byte keys.
#include "detail/reduce_by_key_impl.cuh"

GPUSCAN_FOR_INT_OPS(GPUSCAN_INSTANTIATE_REDUCE_BY_KEY, int32_t)
GPUSCAN_FOR_INT_OPS(GPUSCAN_INSTANTIATE_REDUCE_BY_KEY, uint32_t)
GPUSCAN_INSTANTIATE_REDUCE_BY_KEY(float, Min)
GPUSCAN_INSTANTIATE_REDUCE_BY_KEY(float, Max)
