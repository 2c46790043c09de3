// Test-only fault injection: a kernel that writes through a wild pointer. The illegal address
// is a sticky error: it corrupts the device's primary context, which the CUDA engine shares,
// so every later CUDA call of the process fails. Never linked into the server.
#include <cuda_runtime.h>

#include "fault_kernel.h"

namespace gpuscan::testing {

__global__ void WriteThroughWildPointer(int* p) { *p = 42; }

std::string InjectStickyDeviceFault(int device) {
  cudaSetDevice(device);
  WriteThroughWildPointer<<<1, 1>>>(reinterpret_cast<int*>(0x10));
  const cudaError_t e = cudaDeviceSynchronize();
  return cudaGetErrorName(e);
}

}  // namespace gpuscan::testing
