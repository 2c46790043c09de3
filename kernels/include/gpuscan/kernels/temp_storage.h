// Temporary device storage shared by Scan, Reduce and Compact (gpuscan::kernels).
//
// Every function here sizes its storage CUB's way: call it with d_temp == nullptr and it only
// writes the bytes it needs to temp_bytes. Then call it again with a buffer at least that large.
//
// The buffer is meant to live long (one per stream, allocated once):
//   * Zero it once after allocating it: ClearTempStorage (one cudaMemsetAsync).
//   * After that, any sequence of Scan / Reduce / Compact calls, of any algorithm, element type
//     and length, may reuse it in stream order, each with temp_bytes >= what its own size query
//     returned (size it for the largest call). No call needs a reset in between: the single-pass
//     kernels tag their tile states with an epoch the kernel itself advances, and every other
//     algorithm returns the bytes it used to zero before it finishes.
//   * Pass the same pointer every time (the library aligns it up to 256 bytes internally and
//     keeps its epoch counter at that address).
//   * One buffer serves one stream at a time: two calls in flight at once on one buffer race.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

namespace gpuscan::kernels {

// Zeroes a temp buffer before its first use (or after anything else wrote into it).
cudaError_t ClearTempStorage(void* d_temp, std::size_t temp_bytes, cudaStream_t stream);

}  // namespace gpuscan::kernels
