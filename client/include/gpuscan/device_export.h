// ExportDeviceArray: a DeviceArray (device_array.h) for `bytes` bytes at device pointer `p` of
// this process, for calls on device memory (Client::ScanDevice and its kin). Header-only and
// the one place the client side touches CUDA: include it from code built with the CUDA
// runtime. The memory must come from cudaMalloc (not managed, host or VMM memory: the driver
// cannot export those); the allocation must outlive the calls that use it. Throws
// std::runtime_error naming the CUDA call that failed.
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <stdexcept>
#include <string>

#include "gpuscan/device_array.h"

namespace gpuscan {

namespace device_export_detail {

inline void Check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  cudaGetLastError();
  throw std::runtime_error(std::string("ExportDeviceArray: ") + what + ": " + cudaGetErrorName(e) + " (" +
                           cudaGetErrorString(e) + ")");
}

// The allocation's first address (cuMemGetAddressRange, reached through the runtime so the
// caller links no libcuda).
inline uintptr_t AllocationBase(const void* p) {
  static const PFN_cuMemGetAddressRange_v3020 range = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found{};
    if (cudaGetDriverEntryPointByVersion("cuMemGetAddressRange", &fn, 3020, cudaEnableDefault, &found) != cudaSuccess ||
        found != cudaDriverEntryPointSuccess) {
      cudaGetLastError();
      return PFN_cuMemGetAddressRange_v3020{nullptr};
    }
    return reinterpret_cast<PFN_cuMemGetAddressRange_v3020>(fn);
  }();
  if (!range) throw std::runtime_error("ExportDeviceArray: the driver lacks cuMemGetAddressRange");
  CUdeviceptr base = 0;
  size_t size = 0;
  if (range(&base, &size, reinterpret_cast<CUdeviceptr>(p)) != CUDA_SUCCESS) {
    throw std::runtime_error("ExportDeviceArray: the pointer is not in device memory of this process");
  }
  return static_cast<uintptr_t>(base);
}

}  // namespace device_export_detail

inline DeviceArray ExportDeviceArray(const void* p, uint64_t bytes) {
  using device_export_detail::Check;
  cudaPointerAttributes attr{};
  Check(cudaPointerGetAttributes(&attr, p), "cudaPointerGetAttributes");
  if (attr.type != cudaMemoryTypeDevice) {
    throw std::runtime_error("ExportDeviceArray: the pointer is not device memory from cudaMalloc");
  }
  const uintptr_t base = device_export_detail::AllocationBase(p);
  cudaIpcMemHandle_t handle;
  Check(cudaIpcGetMemHandle(&handle, reinterpret_cast<void*>(base)), "cudaIpcGetMemHandle");
  cudaDeviceProp prop{};
  Check(cudaGetDeviceProperties(&prop, attr.device), "cudaGetDeviceProperties");
  DeviceArray a;
  a.device_uuid.assign(prop.uuid.bytes, sizeof(prop.uuid.bytes));
  a.handle.assign(handle.reserved, sizeof(handle.reserved));
  a.offset = reinterpret_cast<uintptr_t>(p) - base;
  a.bytes = bytes;
  return a;
}

}  // namespace gpuscan
