// The CUB histogram peer of the kernel suite: cub::DeviceHistogram::HistogramEven on float32.
#include <cub/device/device_histogram.cuh>

#include "gpuscan/kernels/histogram.h"

template <class T>
cudaError_t gpuscan::kernels::HistogramCubEven(void* d_temp, std::size_t& temp_bytes, const T* d_in, uint64_t n,
                                               int bins, T lo, T hi, unsigned int* d_counts, cudaStream_t stream) {
  return cub::DeviceHistogram::HistogramEven(d_temp, temp_bytes, d_in, d_counts, bins + 1, lo, hi,
                                             static_cast<int64_t>(n), stream);
}

template cudaError_t gpuscan::kernels::HistogramCubEven<float>(void*, std::size_t&, const float*, uint64_t, int, float,
                                                               float, unsigned int*, cudaStream_t);
