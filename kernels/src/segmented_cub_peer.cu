// The CUB peers of segmented scans and reduce by key for the kernel suite: InclusiveScanByKey and
// ReduceByKey, int32 keys and values.
#include <cub/device/device_reduce.cuh>
#include <cub/device/device_scan.cuh>

#include <cuda/std/functional>

#include "gpuscan/kernels/reduce_by_key.h"
#include "gpuscan/kernels/segmented_scan.h"

namespace gpuscan::kernels {

cudaError_t SegmentedScanByKeyCub(void* d_temp, std::size_t& temp_bytes, const int32_t* d_keys,
                                  const int32_t* d_values, int32_t* d_out, uint64_t n, cudaStream_t stream) {
  if (n > 0x7fffffffull) return cudaErrorInvalidValue;
  return cub::DeviceScan::InclusiveScanByKey(d_temp, temp_bytes, d_keys, d_values, d_out, ::cuda::std::plus<int32_t>{},
                                             static_cast<int>(n), ::cuda::std::equal_to<int32_t>{}, stream);
}

cudaError_t ReduceByKeyCub(void* d_temp, std::size_t& temp_bytes, const int32_t* d_keys, const int32_t* d_values,
                           int32_t* d_keys_out, int32_t* d_values_out, int32_t* d_num_runs, uint64_t n,
                           cudaStream_t stream) {
  if (n > 0x7fffffffull) return cudaErrorInvalidValue;
  return cub::DeviceReduce::ReduceByKey(d_temp, temp_bytes, d_keys, d_keys_out, d_values, d_values_out, d_num_runs,
                                        ::cuda::std::plus<int32_t>{}, static_cast<int>(n), stream);
}

}  // namespace gpuscan::kernels
