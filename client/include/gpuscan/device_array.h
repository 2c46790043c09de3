// An array in this process's device memory, as a server on the same host and GPU reaches it
// (header.device_memory): the CUDA IPC handle of the allocation it lies in, its byte range
// there and the device's UUID. The client library knows no CUDA; ExportDeviceArray
// (gpuscan/device_export.h, header-only, for callers built with CUDA) makes one from a pointer.
#pragma once

#include <cstdint>
#include <string>

namespace gpuscan {

struct DeviceArray {
  std::string device_uuid;  // 16 bytes (cudaDeviceProp.uuid)
  std::string handle;       // 64 bytes (cudaIpcMemHandle_t of the allocation)
  uint64_t offset = 0;      // the array's first byte in the allocation
  uint64_t bytes = 0;       // the array's length in bytes
};

}  // namespace gpuscan
