// Device-wide histogram (gpuscan::kernels) with numpy.histogram's bins (see histogram_bins.h).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "gpuscan/kernels/histogram_bins.h"

namespace gpuscan::kernels {

// Adds the slots (bins + kExtraSlots uint64 counters at d_counts, which the caller zeroes once
// per histogram) of d_in[0..n) to d_counts. bins.edges points to device memory. Counts are
// integers, so the result does not depend on the order of the atomics. Asynchronous on `stream`.
template <class T>
cudaError_t Histogram(const T* d_in, uint64_t n, const hist::Bins& bins, unsigned long long* d_counts,
                      cudaStream_t stream);

// The same counts by cub::DeviceHistogram::HistogramEven, the peer for the kernel suite: `bins`
// even bins over [lo, hi) (CUB's own binning: the last bin excludes hi). No below/above/NaN.
template <class T>
cudaError_t HistogramCubEven(void* d_temp, std::size_t& temp_bytes, const T* d_in, uint64_t n, int bins, T lo, T hi,
                             unsigned int* d_counts, cudaStream_t stream);

}  // namespace gpuscan::kernels
