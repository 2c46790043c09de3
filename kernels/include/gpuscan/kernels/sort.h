// Stable sorts on the device (issue 13): keys coded by sort_keys.h, then CUB's radix sort
// (Onesweep), keys alone or with the permutation. Plain CUDA. Instantiated for every dtype.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace gpuscan::kernels {

// Sorts n (< 2^31) keys of d_keys in place, ascending or descending, stable. When d_perm is
// not null it receives the permutation: d_perm[i] = the input position of the i-th sorted key.
// d_temp: null asks the size (temp_bytes) for this n and whether a permutation is wanted; it
// needs no clearing. Asynchronous on `stream`.
template <class T>
cudaError_t Sort(void* d_temp, std::size_t& temp_bytes, T* d_keys, uint32_t* d_perm, uint64_t n, bool descending,
                 cudaStream_t stream);

// out[i] = in[perm[i]] for n elements of `size` bytes (4 or 8). Asynchronous.
cudaError_t Gather(const void* d_in, std::size_t size, const uint32_t* d_perm, void* d_out, uint64_t n,
                   cudaStream_t stream);
// out[i] = perm[i], widened to int64. Asynchronous.
cudaError_t WidenIndices(const uint32_t* d_perm, int64_t* d_out, uint64_t n, cudaStream_t stream);

// The CUB peer of the kernel suite: cub::DeviceRadixSort::SortKeys of n raw unsigned keys (no
// coding), in place through its DoubleBuffer (d_alt: n more keys).
template <class U>
cudaError_t SortKeysCub(void* d_temp, std::size_t& temp_bytes, U* d_keys, U* d_alt, uint64_t n, cudaStream_t stream);

}  // namespace gpuscan::kernels
