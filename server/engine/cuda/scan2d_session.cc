// The matrix scan session of the CUDA engine: the 2-D scan (summed-area table) and the axis scans.
#include "engine/cuda/sessions.h"

#include <cstdint>
#include <cstring>
#include <memory>

#include "engine/cuda/pipeline.h"
#include "engine/dispatch.h"
#include "gpuscan/kernels/scan2d.h"
#include "gpuscan/kernels/scan_axis.h"

namespace gpuscan::engine::cuda {

namespace {

// ---------------------------------------------------------------------------------------------
// Matrix scans: each call's whole rows go up, through one kernel (kernels::Scan2D for both axes,
// kernels::ScanRows or ScanColumns for one; the carry row on the device between calls), and
// back. One step at a time: the wire, not PCIe, paces a call.

template <class T, class Op>
class CudaScan2D final : public Scan2DSession {
 public:
  CudaScan2D(std::shared_ptr<Shared> sh, const Scan2DSpec& spec)
      : sh_(std::move(sh)), cols_(spec.cols), axis_(spec.axis), exclusive_(spec.exclusive) {}

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
    sh.Call(Launch(nullptr, temp_bytes, nullptr, nullptr, rows, s), "matrix scan temp size");
    cuda::DeviceBuffer d_in(bytes, s, budget), d_out(bytes, s, budget), d_temp(temp_bytes, s, budget);
    if (!carry_.get() && axis_ != ScanAxis::kRows) carry_ = cuda::DeviceBuffer(row_bytes, s, budget);
    sh.Call(cudaEventRecord(slot.start.get(), s), "cudaEventRecord");
    sh.Call(cudaMemcpyAsync(d_in.get(), in, bytes, cudaMemcpyHostToDevice, s), "H2D matrix rows");
    sh.Call(cudaEventRecord(slot.h2d_done.get(), s), "cudaEventRecord");
    auto* d_out_t = static_cast<T*>(d_out.get());
    sh.Call(Launch(d_temp.get(), temp_bytes, static_cast<const T*>(d_in.get()), d_out_t, rows, s), "matrix scan kernel");
    if (axis_ == ScanAxis::kBoth) {  // the table's last row (ScanColumns writes its own carry)
      sh.Call(cudaMemcpyAsync(carry_.get(), d_out_t + (rows - 1) * cols_, row_bytes, cudaMemcpyDeviceToDevice, s),
              "scan2d carry row");
    }
    sh.Call(cudaEventRecord(slot.kernel_done.get(), s), "cudaEventRecord");
    sh.Call(cudaMemcpyAsync(out, d_out_t, bytes, cudaMemcpyDeviceToHost, s), "D2H matrix rows");
    sh.Call(cudaEventRecord(slot.d2h_done.get(), s), "cudaEventRecord");
    sh.Call(cudaStreamSynchronize(s), "cudaStreamSynchronize");
    has_carry_ = true;
    AddStepTimes(slot, times);
  }
  std::string algorithm() const override {
    switch (axis_) {
      case ScanAxis::kRows: return "row_folds";
      case ScanAxis::kColumns: return "column_folds";
      default: return "tile_wavefront";
    }
  }

 private:
  // The axis's kernel on `rows` rows, continuing the carry row (a size query when d_temp is null).
  cudaError_t Launch(void* d_temp, size_t& temp_bytes, const T* d_in, T* d_out, uint64_t rows, cudaStream_t s) {
    auto* carry = static_cast<T*>(carry_.get());
    switch (axis_) {
      case ScanAxis::kRows:
        return kernels::ScanRows<T, Op>(d_temp, temp_bytes, d_in, d_out, rows, cols_, exclusive_, s);
      case ScanAxis::kColumns:
        return kernels::ScanColumns<T, Op>(d_temp, temp_bytes, d_in, d_out, rows, cols_, exclusive_,
                                           has_carry_ ? carry : nullptr, carry, s);
      default:
        return kernels::Scan2D<T, Op>(d_temp, temp_bytes, d_in, d_out, rows, cols_, has_carry_ ? carry : nullptr, s);
    }
  }

  std::shared_ptr<Shared> sh_;
  uint64_t cols_;
  ScanAxis axis_;
  bool exclusive_;
  cuda::DeviceBuffer carry_;  // the last row so far: the table's, or each column's inclusive fold
  bool has_carry_ = false;
};

}  // namespace

std::unique_ptr<Scan2DSession> NewScan2D(const std::shared_ptr<Shared>& sh, const Scan2DSpec& spec) {
  return Visit(spec.dtype, spec.op, [&](auto t, auto o) -> std::unique_ptr<Scan2DSession> {
    return std::make_unique<CudaScan2D<typename decltype(t)::type, typename decltype(o)::type>>(sh, spec);
  });
}

}  // namespace gpuscan::engine::cuda
