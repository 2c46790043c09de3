// Histograms on the pool: each thread counts its blocks into counters of its own, added up
// after the chunk (integer counts: the sum is the same in any order).
#include <oneapi/tbb/enumerable_thread_specific.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "engine/cpu/blocks.h"
#include "engine/cpu/sessions.h"
#include "engine/dispatch.h"
#include "gpuscan/kernels/histogram_bins.h"

namespace gpuscan::engine::cpu {
namespace {

template <class T>
class CpuHistogram final : public HistogramSession {
 public:
  CpuHistogram(std::shared_ptr<Pool> pool, const HistogramSpec& spec)
      : pool_(std::move(pool)), edges_(spec.edges),
        bins_(hist::MakeBins(edges_.data(), static_cast<uint32_t>(edges_.size() - 1), spec.even)),
        totals_(edges_.size() - 1 + hist::kExtraSlots),
        per_thread_([n = totals_.size()] { return std::vector<uint64_t>(n); }) {}

  void Process(const void* in, uint64_t n, StageTimes& times) override {
    if (n == 0) return;
    CheckBuffer(in, n, "input");
    KernelTimer timer(times);
    const auto* src = static_cast<const unsigned char*>(in);
    if (!RunParallel(*pool_, n)) {
      Count(src, 0, n, totals_);
      return;
    }
    const Blocks blocks(n);
    ForBlocks(*pool_, blocks.count, true,
              [&](uint64_t b) { Count(src, blocks.begin(b), blocks.end(b), per_thread_.local()); });
    for (std::vector<uint64_t>& local : per_thread_) {
      for (size_t i = 0; i < local.size(); ++i) totals_[i] += std::exchange(local[i], 0);
    }
  }

  // The cpu engine's "device" memory is host memory (a resident array): in pieces, as a scan's.
  void ProcessDevice(const void* in, uint64_t n, StageTimes& times) override {
    const uint64_t piece = kResidentPieceBytes / sizeof(T);
    for (uint64_t at = 0; at < n; at += piece) Process(static_cast<const T*>(in) + at, std::min(piece, n - at), times);
  }

  std::vector<uint64_t> Result() const override { return totals_; }
  std::string algorithm() const override { return "cpu_blocked"; }

 private:
  void Count(const unsigned char* src, uint64_t begin, uint64_t end, std::vector<uint64_t>& counts) const {
    for (uint64_t i = begin; i < end; ++i) ++counts[hist::SlotOf(Load<T>(src, i), bins_)];
  }

  std::shared_ptr<Pool> pool_;
  std::vector<double> edges_;
  hist::Bins bins_;  // points into edges_
  std::vector<uint64_t> totals_;
  tbb::enumerable_thread_specific<std::vector<uint64_t>> per_thread_;
};

}  // namespace

std::unique_ptr<HistogramSession> NewHistogram(const std::shared_ptr<Pool>& pool, const HistogramSpec& spec) {
  return VisitDType(spec.dtype, [&](auto t) -> std::unique_ptr<HistogramSession> {
    return std::make_unique<CpuHistogram<typename decltype(t)::type>>(pool, spec);
  });
}

}  // namespace gpuscan::engine::cpu
