// Reduce by key on the device (issue 13): one pass over values and keys that writes one (key,
// reduction) per run of equal consecutive keys. It is the fused segmented scan's kernel
// (segmented_scan.h) whose pairs also count the runs that close, so each run's result lands at
// its place in the output as the tile that closes it is stored. Plain CUDA.
//
// 4-byte values only (the pair and its count fill the look-back's 8 value bytes): T in
// {int32_t, uint32_t} with every integer operator, float with MIN and MAX (exact in any
// association); K in {uint32_t, uint64_t} (a key's bits: signed keys pass as unsigned).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "gpuscan/kernels/temp_storage.h"

namespace gpuscan::kernels {

// What a reduce by key carries from one call to the next (device memory), and what it reports.
template <class T>
struct RunCarry {
  T value;            // the reduction so far of the run open at the call's end
  uint64_t last_key;  // the call's last key bits
  uint64_t started;   // nonzero once any element was seen
  uint64_t runs;      // runs the call wrote
};

// Reduces the n < 2^31 values of d_values by runs of equal keys in d_keys. Each run that closes
// inside the call (the next key differs, or it ends the call and `close` is set) gets its key
// and reduction written to d_keys_out / d_values_out (room for n each), in order; d_carry_out
// (required; may alias d_carry_in) says how many, and holds the run still open. With
// d_carry_in (nullable: the array starts here), the call's first element continues the carried
// run when its key equals the carried key; when it differs, the carried run closed before the
// call, and is the caller's to emit (its key and value are in the carry it passed). Temp
// storage as temp_storage.h says. Asynchronous.
template <class T, class Op, class K>
cudaError_t ReduceByKey(void* d_temp, std::size_t& temp_bytes, const T* d_values, const K* d_keys, K* d_keys_out,
                        T* d_values_out, uint64_t n, bool close, const RunCarry<T>* d_carry_in,
                        RunCarry<T>* d_carry_out, cudaStream_t stream);

// The CUB peer of the kernel suite: cub::DeviceReduce::ReduceByKey of n <= 2^31 int32 values
// under int32 keys (SUM); *d_num_runs (int32) gets the run count. CUB sizes temp storage.
cudaError_t ReduceByKeyCub(void* d_temp, std::size_t& temp_bytes, const int32_t* d_keys, const int32_t* d_values,
                           int32_t* d_keys_out, int32_t* d_values_out, int32_t* d_num_runs, uint64_t n,
                           cudaStream_t stream);

}  // namespace gpuscan::kernels
