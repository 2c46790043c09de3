// Sorts of 4-byte keys (int32, uint32, float), the gathers, and the CUB peer for 32-bit codes.
#include "detail/sort_impl.cuh"

GPUSCAN_INSTANTIATE_SORT(int32_t)
GPUSCAN_INSTANTIATE_SORT(uint32_t)
GPUSCAN_INSTANTIATE_SORT(float)
template cudaError_t gpuscan::kernels::SortKeysCub<uint32_t>(void*, std::size_t&, uint32_t*, uint32_t*, uint64_t,
                                                             cudaStream_t);

namespace gpuscan::kernels {
namespace {

template <class V>
__global__ void GatherKernel(const V* in, const uint32_t* perm, V* out, uint64_t n) {
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < n; i += uint64_t(gridDim.x) * blockDim.x) {
    out[i] = in[perm[i]];
  }
}

__global__ void WidenKernel(const uint32_t* perm, int64_t* out, uint64_t n) {
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < n; i += uint64_t(gridDim.x) * blockDim.x) {
    out[i] = perm[i];
  }
}

}  // namespace

cudaError_t Gather(const void* d_in, std::size_t size, const uint32_t* d_perm, void* d_out, uint64_t n,
                   cudaStream_t stream) {
  using detail::sorting::Blocks;
  using detail::sorting::kBlock;
  if (n == 0) return cudaSuccess;
  if (size == 4) {
    GatherKernel<uint32_t><<<Blocks(n), kBlock, 0, stream>>>(static_cast<const uint32_t*>(d_in), d_perm,
                                                              static_cast<uint32_t*>(d_out), n);
  } else if (size == 8) {
    GatherKernel<uint64_t><<<Blocks(n), kBlock, 0, stream>>>(static_cast<const uint64_t*>(d_in), d_perm,
                                                              static_cast<uint64_t*>(d_out), n);
  } else {
    return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

cudaError_t WidenIndices(const uint32_t* d_perm, int64_t* d_out, uint64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  WidenKernel<<<detail::sorting::Blocks(n), detail::sorting::kBlock, 0, stream>>>(d_perm, d_out, n);
  return cudaGetLastError();
}

}  // namespace gpuscan::kernels
