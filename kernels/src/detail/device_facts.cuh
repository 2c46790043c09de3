// What launches choose by, about the current device (host side), asked once per device and kept:
// how many blocks of a persistent kernel it holds at once, and its peak DRAM bandwidth.
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

// The current device's peak DRAM bandwidth in GB/s (memory clock x bus width, two transfers a
// clock): 3352 for the H100 SXM (80 GB), 4916 for the H200.
inline cudaError_t PeakDramGBs(double& gbs) {
  constexpr int kDevices = 64;
  static std::atomic<double> known[kDevices] = {};  // 0: not yet asked on that device
  int device = 0;
  if (cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) return e;
  if (device < kDevices && (gbs = known[device].load(std::memory_order_acquire)) != 0) return cudaSuccess;
  int khz = 0, bits = 0;
  if (cudaError_t e = cudaDeviceGetAttribute(&khz, cudaDevAttrMemoryClockRate, device); e != cudaSuccess) return e;
  if (cudaError_t e = cudaDeviceGetAttribute(&bits, cudaDevAttrGlobalMemoryBusWidth, device); e != cudaSuccess) {
    return e;
  }
  gbs = 2.0 * khz * 1e3 * (bits / 8.0) / 1e9;
  if (device < kDevices) known[device].store(gbs, std::memory_order_release);
  return cudaSuccess;
}

}  // namespace gpuscan::kernels::detail
