// What launches choose by, about the current device (host side), asked once per device and kept:
// how many blocks of a persistent kernel it holds at once, and its peak DRAM bandwidth.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstdint>

namespace gpuscan::kernels::detail {

constexpr int kKeptDevices = 64;

// `value` for the current device: kept in known[device] (0: not yet asked), else ask(device, value)
// and kept.
template <class T, class Ask>
cudaError_t KeptForDevice(std::atomic<T> (&known)[kKeptDevices], T& value, Ask&& ask) {
  int device = 0;
  if (cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) return e;
  if (device < kKeptDevices && (value = known[device].load(std::memory_order_acquire)) != 0) return cudaSuccess;
  if (cudaError_t e = ask(device, value); e != cudaSuccess) return e;
  if (device < kKeptDevices) known[device].store(value, std::memory_order_release);
  return cudaSuccess;
}

// Blocks of kKernel (`threads` a block, `smem` bytes of dynamic shared memory) that fit the current
// device at once; sets the kernel's dynamic shared-memory attribute on first use. Kept per kernel
// and device: the three queries took microseconds a call, which a small call's launch waited on.
template <auto kKernel>
cudaError_t ResidentBlocks(int threads, int smem, uint64_t& resident) {
  static std::atomic<uint64_t> known[kKeptDevices] = {};
  return KeptForDevice(known, resident, [&](int device, uint64_t& value) {
    int sms = 0, per_sm = 0;
    if (cudaError_t e = cudaFuncSetAttribute(kKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
        e != cudaSuccess) {
      return e;
    }
    if (cudaError_t e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device); e != cudaSuccess) {
      return e;
    }
    if (cudaError_t e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kKernel, threads, smem);
        e != cudaSuccess) {
      return e;
    }
    value = static_cast<uint64_t>(std::max(per_sm, 1)) * std::max(sms, 1);
    return cudaSuccess;
  });
}

// The current device's peak DRAM bandwidth in GB/s (memory clock x bus width, two transfers a
// clock): 3352 for the H100 SXM (80 GB), 4814 for the H200 (as its driver reports the clock).
inline cudaError_t PeakDramGBs(double& gbs) {
  static std::atomic<double> known[kKeptDevices] = {};
  return KeptForDevice(known, gbs, [](int device, double& value) {
    int khz = 0, bits = 0;
    if (cudaError_t e = cudaDeviceGetAttribute(&khz, cudaDevAttrMemoryClockRate, device); e != cudaSuccess) return e;
    if (cudaError_t e = cudaDeviceGetAttribute(&bits, cudaDevAttrGlobalMemoryBusWidth, device); e != cudaSuccess) {
      return e;
    }
    value = 2.0 * khz * 1e3 * (bits / 8.0) / 1e9;
    return cudaSuccess;
  });
}

}  // namespace gpuscan::kernels::detail
