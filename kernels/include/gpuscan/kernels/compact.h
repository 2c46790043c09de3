// Stream compaction (gpuscan::kernels), instantiated for the six element types.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "gpuscan/kernels/temp_storage.h"
#include "gpuscan/types.h"

namespace gpuscan::kernels {

// The shared vocabulary's predicate operators (gpuscan/types.h). Comparisons are IEEE (false with
// a NaN operand, except kNe, which is true). kInRange keeps threshold <= x < upper. kNonzero
// keeps x != 0.
using types::PredicateOp;

template <class T>
struct Predicate {
  PredicateOp op = PredicateOp::kNonzero;
  T threshold{};
  T upper{};  // kInRange only
};

// Stable compaction of n elements: keeps x[i] where d_flags[i] != 0 (when d_flags is not
// nullptr; pred is then ignored) or where pred(x[i]) holds. Writes the kept values in order
// to d_out_values (nullable) and their positions index_base + i to d_out_indices (nullable),
// and the number kept to *d_num_kept (device memory; required). d_in may be nullptr only in
// flags mode with d_out_values == nullptr. use_cub: cub::DeviceSelect as the peer (two passes
// when both values and indices are wanted); otherwise one pass with a look-back over the kept
// counts. Asynchronous on `stream`.
template <class T>
cudaError_t Compact(bool use_cub, void* d_temp, std::size_t& temp_bytes, const T* d_in,
                    const uint8_t* d_flags, Predicate<T> pred, uint64_t n, int64_t index_base,
                    T* d_out_values, int64_t* d_out_indices, uint64_t* d_num_kept,
                    cudaStream_t stream);

}  // namespace gpuscan::kernels
