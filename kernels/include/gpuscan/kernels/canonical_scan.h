// Reproducible float scans on the device (issue 11): the canonical tree of canonical_tree.h,
// computed with exactly the same operations as the host functions there, so a float SUM or
// PRODUCT scan gives the same bits on every run, GPU model, chunking and engine.
//
// Whole tiles only (4096 elements at global multiples of 4096): the engine computes the
// partial tiles at a chunk's edges on the host with canonical_tree.h, which keeps the kernels
// free of bounds and the chunk-crossing state small (CanonicalState).
//
// Instantiated for float and double with ops::Sum and ops::Product.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "gpuscan/kernels/operators.h"
#include "gpuscan/kernels/temp_storage.h"

namespace gpuscan::kernels {

// The tree's state between calls, in device memory (same layout on the host). Holds what
// canon::TreeState holds except the tile count, which the caller passes as first_tile.
template <class T>
struct CanonicalState {
  T aggs[256];        // raw aggregates of the current super's completed tiles
  T carry;            // combined supers before the current one, when has_carry
  int32_t has_carry;  // 0 before the first super completes
};

// Scans tiles * 4096 elements of d_in into d_out, whose first element has the global index
// first_tile * 4096, continuing *d_state (which it updates). first_tile == 0 starts a new array:
// *d_state is then written, not read, so it needs no clearing. d_out == nullptr: only the state
// is advanced (a reduction's whole tiles). Exclusive as canonical_tree.h defines it. Uses the
// temp storage contract of temp_storage.h (a scan, one pass, leaves epoch-tagged tile words as
// the other single-pass kernels do; a state-only call leaves the bytes it used zero). Asynchronous.
template <class T, class Op>
cudaError_t CanonicalScan(void* d_temp, std::size_t& temp_bytes, const T* d_in, T* d_out, uint64_t tiles,
                          uint64_t first_tile, bool exclusive, CanonicalState<T>* d_state, cudaStream_t stream);

}  // namespace gpuscan::kernels
