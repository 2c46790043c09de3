// How many blocks of a persistent kernel the current device holds at once (host side).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstdint>

namespace gpuscan::kernels::detail {

// Blocks of kKernel (`threads` a block, `smem` bytes of dynamic shared memory) that fit the current
// device at once; sets the kernel's dynamic shared-memory attribute on first use. Kept per kernel
// and device: the three queries took microseconds a call, which a small call's launch waited on.
template <auto kKernel>
cudaError_t ResidentBlocks(int threads, int smem, uint64_t& resident) {
  constexpr int kDevices = 64;
  static std::atomic<uint64_t> known[kDevices] = {};  // 0: not yet asked on that device
  int device = 0;
  if (cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) return e;
  if (device < kDevices && (resident = known[device].load(std::memory_order_acquire)) != 0) return cudaSuccess;
  int sms = 0, per_sm = 0;
  if (cudaError_t e = cudaFuncSetAttribute(kKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
      e != cudaSuccess) {
    return e;
  }
  if (cudaError_t e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device); e != cudaSuccess) return e;
  if (cudaError_t e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kKernel, threads, smem); e != cudaSuccess) {
    return e;
  }
  resident = static_cast<uint64_t>(std::max(per_sm, 1)) * std::max(sms, 1);
  if (device < kDevices) known[device].store(resident, std::memory_order_release);
  return cudaSuccess;
}

}  // namespace gpuscan::kernels::detail
