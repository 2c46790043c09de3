// Sort on the CUDA engine: the whole array on the device (taken from the --device-memory-limit
// budget): keys up, coded and radix-sorted (kernels::Sort, CUB's Onesweep), values gathered by
// the permutation, down. The copies take any pointer CUDA knows (cudaMemcpyDefault): the caller's
// device memory (CUDA IPC) is copied device to device.
#include "engine/cuda/sessions.h"

#include <cstdint>
#include <string>

#include "engine/cuda/pipeline.h"
#include "engine/dispatch.h"
#include "gpuscan/kernels/sort.h"

namespace gpuscan::engine::cuda {

std::string Sort(Shared& sh, const SortSpec& spec, const void* keys, const void* values, uint64_t n, void* keys_out,
                 void* values_out, int64_t* indices_out, StageTimes& times) {
  if (n == 0) return "radix_sort";
  if (n > 0x7fffffffull) {  // CUB's radix sort counts items in an int
    throw Error(ErrorCode::kResourceExhausted, "the cuda engine sorts at most 2147483647 keys in one call, not " +
                                                   std::to_string(n) + " (lower --max-sort-bytes)");
  }
  DeviceGuard guard(sh);
  StagingLease pair(sh);
  Slot& slot = pair->slots[0];
  cudaStream_t s = slot.s();
  cuda::DeviceMemoryBudget* budget = pair->budget;
  const size_t ks = SizeOf(spec.dtype), vs = spec.has_values ? SizeOf(spec.values_dtype) : 0;
  const bool perm = spec.has_values || spec.want_indices;
  VisitDType(spec.dtype, [&](auto t) {
    using T = typename decltype(t)::type;
    size_t temp_bytes = 0;
    sh.Call(kernels::Sort<T>(nullptr, temp_bytes, nullptr, nullptr, n, spec.descending, s), "sort temp size");
    cuda::DeviceBuffer d_keys(n * ks, s, budget), d_temp(temp_bytes, s, budget);
    cuda::DeviceBuffer d_perm(perm ? n * 4 : 0, s, budget), d_vin(n * vs, s, budget), d_vout(n * vs, s, budget);
    cuda::DeviceBuffer d_idx(indices_out ? n * 8 : 0, s, budget);
    sh.Call(cudaEventRecord(slot.start.get(), s), "cudaEventRecord");
    sh.Call(cudaMemcpyAsync(d_keys.get(), keys, n * ks, cudaMemcpyDefault, s), "sort keys in");
    if (vs) sh.Call(cudaMemcpyAsync(d_vin.get(), values, n * vs, cudaMemcpyDefault, s), "sort values in");
    sh.Call(cudaEventRecord(slot.h2d_done.get(), s), "cudaEventRecord");
    auto* p = static_cast<uint32_t*>(d_perm.get());
    sh.Call(kernels::Sort<T>(d_temp.get(), temp_bytes, static_cast<T*>(d_keys.get()), perm ? p : nullptr, n,
                             spec.descending, s),
            "sort kernel");
    if (vs) sh.Call(kernels::Gather(d_vin.get(), vs, p, d_vout.get(), n, s), "gather values");
    if (indices_out) sh.Call(kernels::WidenIndices(p, static_cast<int64_t*>(d_idx.get()), n, s), "widen indices");
    sh.Call(cudaEventRecord(slot.kernel_done.get(), s), "cudaEventRecord");
    if (keys_out) sh.Call(cudaMemcpyAsync(keys_out, d_keys.get(), n * ks, cudaMemcpyDefault, s), "sorted keys out");
    if (values_out) sh.Call(cudaMemcpyAsync(values_out, d_vout.get(), n * vs, cudaMemcpyDefault, s), "sorted values out");
    if (indices_out) sh.Call(cudaMemcpyAsync(indices_out, d_idx.get(), n * 8, cudaMemcpyDefault, s), "indices out");
    sh.Call(cudaEventRecord(slot.d2h_done.get(), s), "cudaEventRecord");
    sh.Call(cudaStreamSynchronize(s), "cudaStreamSynchronize");
    AddStepTimes(slot, times);
  });
  return "radix_sort";
}

}  // namespace gpuscan::engine::cuda
