// Device-wide prefix scans (gpuscan::kernels). Plain CUDA: no gRPC, protobuf or logging here.
//
// Layering follows CUB: this host API (sizes temp storage, picks the grid, checks every launch)
// -> agents, one tile's work per thread block (src/detail/agent_*.cuh) -> block and warp
// primitives (src/detail/block_scan.cuh, warp.cuh). Tuning is plain data in src/detail/tuning.cuh.
//
// Instantiated for T in {int32_t, int64_t, uint32_t, uint64_t, float, double} and Op in
// {Sum, Product, Min, Max} of gpuscan::ops (operators.h), plus {BitAnd, BitOr, BitXor} for the
// integer types. Any other combination fails to link.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "gpuscan/kernels/operators.h"
#include "gpuscan/kernels/temp_storage.h"

namespace gpuscan::kernels {

enum class ScanAlgorithm {
  kDecoupledLookback,  // default: one pass, one launch; tiles look back over 32 predecessors at once
  kChained,            // one pass; each tile waits for its predecessor's inclusive prefix
  kReduceThenScan,     // three launches: per-block sums, scan of the sums, scan with offsets
  kKoggeStone,         // reduce-then-scan with a Kogge-Stone block scan (in place, two barriers)
  kBrentKung,          // ... with a Brent-Kung block scan (padded shared memory)
  kBlelloch,           // ... with a Blelloch up-sweep/down-sweep block scan (padded)
  kHillisSteele,       // ... with a double-buffered Hillis-Steele block scan
  kCub,                // cub::DeviceScan, the reference peer
};

// Lower-case names as the wire and the CLI spell them ("decoupled_lookback", ...).
const char* ScanAlgorithmName(ScanAlgorithm algo);

// Scans n elements of d_in into d_out (d_out == d_in is allowed: in place).
//   inclusive: out[i] = carry op x[0] op ... op x[i]
//   exclusive: out[i] = carry op x[0] op ... op x[i-1]   (out[0] = carry)
// carry is *d_carry_in, or Op::identity() when d_carry_in is nullptr: the combined value of
// everything before this chunk, so that one long array can be scanned as many calls with the
// carry staying on the device. d_carry_out (nullable; may alias d_carry_in) receives
// carry op x[0] op ... op x[n-1] (the carry for the next chunk; carry itself when n == 0).
// Float SUM / PRODUCT results depend on the association order, which differs from a sequential
// loop (and, for the single-pass algorithms, from run to run); everything else is exact.
// Returns the first CUDA error met (cudaErrorInvalidValue for bad arguments or a temp buffer
// smaller than the size query said). Asynchronous on `stream`.
template <class T, class Op>
cudaError_t Scan(ScanAlgorithm algo, void* d_temp, std::size_t& temp_bytes, const T* d_in, T* d_out,
                 uint64_t n, bool exclusive, const T* d_carry_in, T* d_carry_out,
                 cudaStream_t stream);

}  // namespace gpuscan::kernels
