// The 2-D scan (summed-area table) session of the CUDA engine.
#include "engine/cuda/sessions.h"

#include <cstdint>
#include <cstring>
#include <memory>

#include "engine/cuda/pipeline.h"
#include "engine/dispatch.h"
#include "gpuscan/kernels/scan2d.h"

namespace gpuscan::engine::cuda {

namespace {

// ---------------------------------------------------------------------------------------------
// 2-D scan: each call's whole rows go up, through kernels::Scan2D (one pass, the carry row on
// the device between calls), and back. One step at a time: the wire, not PCIe, paces a call.

template <class T, class Op>
class CudaScan2D final : public Scan2DSession {
 public:
  CudaScan2D(std::shared_ptr<Shared> sh, uint64_t cols) : sh_(std::move(sh)), cols_(cols) {}

  void Process(const void* in, void* out, uint64_t rows, StageTimes& times) override {
    if (rows == 0) return;
    Shared& sh = *sh_;
    DeviceGuard guard(sh);
    StagingLease pair(sh);
    Slot& slot = pair->slots[0];
    cudaStream_t s = slot.s();
    cuda::DeviceMemoryBudget* budget = pair->budget;
    const uint64_t bytes = rows * cols_ * sizeof(T), row_bytes = cols_ * sizeof(T);
    size_t temp_bytes = 0;
    sh.Call(kernels::Scan2D<T, Op>(nullptr, temp_bytes, nullptr, nullptr, rows, cols_, nullptr, s), "scan2d temp size");
    cuda::DeviceBuffer d_in(bytes, s, budget), d_out(bytes, s, budget), d_temp(temp_bytes, s, budget);
    if (!carry_.get()) carry_ = cuda::DeviceBuffer(row_bytes, s, budget);
    sh.Call(cudaEventRecord(slot.start.get(), s), "cudaEventRecord");
    sh.Call(cudaMemcpyAsync(d_in.get(), in, bytes, cudaMemcpyHostToDevice, s), "H2D scan2d rows");
    sh.Call(cudaEventRecord(slot.h2d_done.get(), s), "cudaEventRecord");
    auto* d_out_t = static_cast<T*>(d_out.get());
    sh.Call(kernels::Scan2D<T, Op>(d_temp.get(), temp_bytes, static_cast<const T*>(d_in.get()), d_out_t, rows, cols_,
                                   has_carry_ ? static_cast<const T*>(carry_.get()) : nullptr, s),
            "scan2d kernel");
    sh.Call(cudaMemcpyAsync(carry_.get(), d_out_t + (rows - 1) * cols_, row_bytes, cudaMemcpyDeviceToDevice, s),
            "scan2d carry row");
    sh.Call(cudaEventRecord(slot.kernel_done.get(), s), "cudaEventRecord");
    sh.Call(cudaMemcpyAsync(out, d_out_t, bytes, cudaMemcpyDeviceToHost, s), "D2H scan2d rows");
    sh.Call(cudaEventRecord(slot.d2h_done.get(), s), "cudaEventRecord");
    sh.Call(cudaStreamSynchronize(s), "cudaStreamSynchronize");
    has_carry_ = true;
    AddStepTimes(slot, times);
  }
  std::string algorithm() const override { return "tile_wavefront"; }

 private:
  std::shared_ptr<Shared> sh_;
  uint64_t cols_;
  cuda::DeviceBuffer carry_;  // the last row of the table so far
  bool has_carry_ = false;
};

}  // namespace

std::unique_ptr<Scan2DSession> NewScan2D(const std::shared_ptr<Shared>& sh, const Scan2DSpec& spec) {
  return Visit(spec.dtype, spec.op, [&](auto t, auto o) -> std::unique_ptr<Scan2DSession> {
    return std::make_unique<CudaScan2D<typename decltype(t)::type, typename decltype(o)::type>>(sh, spec.cols);
  });
}

}  // namespace gpuscan::engine::cuda
