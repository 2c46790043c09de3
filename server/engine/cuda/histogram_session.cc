// The histogram session of the CUDA engine.
#include "engine/cuda/sessions.h"

#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "engine/cuda/pipeline.h"
#include "engine/dispatch.h"
#include "gpuscan/kernels/histogram.h"

namespace gpuscan::engine::cuda {

namespace {

// ---------------------------------------------------------------------------------------------
// Histogram: the counters (bins, below, above, NaN) stay on the device for the whole call; every
// sub-chunk's kernel adds to them, and Result reads them once.

template <class T>
class CudaHistogram final : public HistogramSession {
 public:
  CudaHistogram(std::shared_ptr<Shared> sh, const HistogramSpec& spec)
      : sh_(std::move(sh)), edges_(spec.edges),
        bins_(hist::MakeBins(edges_.data(), static_cast<uint32_t>(edges_.size() - 1), spec.even)),
        slots_(edges_.size() - 1 + hist::kExtraSlots) {}

  void Process(const void* in, uint64_t n, StageTimes& times) override {
    if (n == 0) return;
    Shared& sh = *sh_;
    DeviceGuard guard(sh);
    StagingLease pair(sh);
    auto* counts = Counters(*pair);
    RunPipelined<T>(sh, *pair, in, nullptr, n, times, [&](Slot& s, uint64_t m) {
      sh.Call(kernels::Histogram<T>(static_cast<const T*>(s.d_in.get()), m, bins_, counts, s.s()), "histogram kernel");
    });
  }

  void ProcessDevice(const void* in, uint64_t n, StageTimes& times) override {
    if (n == 0) return;
    Shared& sh = *sh_;
    DeviceGuard guard(sh);
    StagingLease pair(sh);
    auto* counts = Counters(*pair);
    RunOnDevice(sh, *pair, times, [&](cudaStream_t stream) {
      sh.Call(kernels::Histogram<T>(static_cast<const T*>(in), n, bins_, counts, stream), "histogram kernel");
    });
  }

  std::vector<uint64_t> Result() const override {
    std::vector<uint64_t> counts(slots_);
    if (d_counts_.get()) {
      DeviceGuard guard(*sh_);
      sh_->Call(cudaMemcpy(counts.data(), d_counts_.get(), slots_ * sizeof(uint64_t), cudaMemcpyDeviceToHost),
                "D2H histogram counts");
    }
    return counts;
  }
  std::string algorithm() const override { return "shared_atomics"; }

 private:
  // The counters, made on the first chunk: edges up and counters zeroed in slot 0's stream, which
  // runs the first kernel.
  unsigned long long* Counters(StagingPair& pair) {
    if (!d_counts_.get()) {
      Shared& sh = *sh_;
      cudaStream_t s0 = pair.slots[0].s();
      d_edges_ = cuda::DeviceBuffer(edges_.size() * sizeof(double), s0);
      d_counts_ = cuda::DeviceBuffer(slots_ * sizeof(unsigned long long), s0);
      sh.Call(cudaMemcpyAsync(d_edges_.get(), edges_.data(), edges_.size() * sizeof(double), cudaMemcpyHostToDevice,
                              s0),
              "H2D histogram edges");
      sh.Call(cudaMemsetAsync(d_counts_.get(), 0, slots_ * sizeof(unsigned long long), s0), "histogram counters");
      bins_.edges = static_cast<const double*>(d_edges_.get());
    }
    return static_cast<unsigned long long*>(d_counts_.get());
  }

  std::shared_ptr<Shared> sh_;
  std::vector<double> edges_;
  hist::Bins bins_;  // edges: device memory once the first chunk came
  size_t slots_;
  cuda::DeviceBuffer d_edges_;
  cuda::DeviceBuffer d_counts_;
};

}  // namespace

std::unique_ptr<HistogramSession> NewHistogram(const std::shared_ptr<Shared>& sh, const HistogramSpec& spec) {
  return VisitDType(spec.dtype, [&](auto t) -> std::unique_ptr<HistogramSession> {
    return std::make_unique<CudaHistogram<typename decltype(t)::type>>(sh, spec);
  });
}

}  // namespace gpuscan::engine::cuda
