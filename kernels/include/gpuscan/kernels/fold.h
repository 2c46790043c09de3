// A scan's carry folded into results already on the device (gpuscan::kernels).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "gpuscan/kernels/operators.h"

namespace gpuscan::kernels {

// d_out[i] = op(carry, d_out[i]) for i < n; set_first: then d_out[0] = carry exactly (an exclusive
// scan's first result: op(carry, identity) could turn a -0.0 carry into +0.0). One pass, no
// temporary storage; asynchronous on `stream`. Instantiated for the same (T, Op) pairs as Scan.
template <class T, class Op>
cudaError_t FoldCarry(T* d_out, uint64_t n, T carry, bool set_first, cudaStream_t stream);

}  // namespace gpuscan::kernels
