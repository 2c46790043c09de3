// FoldCarry for all six element types and their operators: a grid-stride elementwise pass.
#include <algorithm>

#include "detail/common.cuh"
#include "gpuscan/kernels/fold.h"

namespace gpuscan::kernels {
namespace {

template <class T, class Op>
__global__ void FoldCarryKernel(T* out, uint64_t n, T carry, bool set_first) {
  const Op op;
  const uint64_t stride = uint64_t{gridDim.x} * blockDim.x;
  for (uint64_t i = uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += stride) {
    out[i] = (set_first && i == 0) ? carry : op(carry, out[i]);
  }
}

}  // namespace

template <class T, class Op>
cudaError_t FoldCarry(T* d_out, uint64_t n, T carry, bool set_first, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  constexpr unsigned kThreads = 256;
  int device = 0, sms = 0;
  if (cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) return e;
  if (cudaError_t e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device); e != cudaSuccess) return e;
  // Enough blocks to fill every SM a few times over; each thread strides over the rest.
  const uint64_t want = (n + kThreads - 1) / kThreads;
  const unsigned blocks = static_cast<unsigned>(std::min<uint64_t>(want, uint64_t(sms) * 8));
  FoldCarryKernel<T, Op><<<blocks, kThreads, 0, stream>>>(d_out, n, carry, set_first);
  return cudaGetLastError();
}

}  // namespace gpuscan::kernels

#define GPUSCAN_INSTANTIATE_FOLD(T, OP)                                                            \
  template cudaError_t gpuscan::kernels::FoldCarry<T, gpuscan::ops::OP<T>>(T*, uint64_t, T, bool, \
                                                                          cudaStream_t);

GPUSCAN_FOR_INT_OPS(GPUSCAN_INSTANTIATE_FOLD, int32_t)
GPUSCAN_FOR_INT_OPS(GPUSCAN_INSTANTIATE_FOLD, int64_t)
GPUSCAN_FOR_INT_OPS(GPUSCAN_INSTANTIATE_FOLD, uint32_t)
GPUSCAN_FOR_INT_OPS(GPUSCAN_INSTANTIATE_FOLD, uint64_t)
GPUSCAN_FOR_ARITH_OPS(GPUSCAN_INSTANTIATE_FOLD, float)
GPUSCAN_FOR_ARITH_OPS(GPUSCAN_INSTANTIATE_FOLD, double)
