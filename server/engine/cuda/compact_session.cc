// The compaction session of the CUDA engine.
#include "engine/cuda/sessions.h"

#include <cstdint>
#include <cstring>
#include <memory>

#include "engine/cuda/pipeline.h"
#include "engine/dispatch.h"
#include "gpuscan/kernels/compact.h"

namespace gpuscan::engine::cuda {

namespace {

template <class T>
kernels::Predicate<T> ToKernels(const Predicate& p) {
  kernels::Predicate<T> out;
  out.op = p.op;  // one PredicateOp (gpuscan/types.h) for the engine and the kernels
  std::memcpy(&out.threshold, p.threshold, sizeof(T));
  std::memcpy(&out.upper, p.upper, sizeof(T));
  return out;
}

template <class T>
class CudaCompact final : public CompactSession {
 public:
  CudaCompact(std::shared_ptr<Shared> sh, const CompactSpec& spec)
      : sh_(std::move(sh)), spec_(spec), pred_(ToKernels<T>(spec.predicate)) {}

  // Each sub-chunk runs to completion before the next: how many were kept must be known
  // before the kept values can be copied out.
  uint64_t Process(const void* values, const uint8_t* flags, uint64_t n, void* out_values, int64_t* out_indices,
                   StageTimes& times) override {
    if (n == 0) return 0;
    Shared& sh = *sh_;
    DeviceGuard guard(sh);
    StagingLease pair(sh);
    const uint64_t sub = kSubChunkBytes / sizeof(T);
    size_t temp_bytes = 0;
    sh.Call(kernels::Compact<T>(false, nullptr, temp_bytes, nullptr, nullptr, pred_, std::min(n, sub), 0, nullptr,
                                nullptr, nullptr, pair->slots[0].s()),
            "compact temp size");
    pair->EnsureTemp(temp_bytes);
    const char* src = static_cast<const char*>(values);
    uint64_t kept_total = 0;
    Slot& s = pair->slots[0];
    for (uint64_t off = 0; off < n; off += sub) {
      const uint64_t m = std::min(sub, n - off);
      Upload(sh, s, src + off * sizeof(T), m * sizeof(T), spec_.use_flags ? flags + off : nullptr, m);
      KernelBegin(sh, *pair, s);
      size_t bytes = pair->temp.size();
      sh.Call(kernels::Compact<T>(false, pair->temp.get(), bytes, static_cast<const T*>(s.d_in.get()),
                                  spec_.use_flags ? static_cast<const uint8_t*>(s.d_flags.get()) : nullptr, pred_, m,
                                  static_cast<int64_t>(processed_ + off),
                                  spec_.want_values ? static_cast<T*>(s.d_out.get()) : nullptr,
                                  spec_.want_indices ? static_cast<int64_t*>(s.d_idx.get()) : nullptr,
                                  static_cast<uint64_t*>(s.d_count.get()), s.s()),
              "compact kernel");
      KernelEnd(sh, *pair, s);
      sh.Call(cudaMemcpyAsync(s.h_count.get(), s.d_count.get(), sizeof(uint64_t), cudaMemcpyDeviceToHost, s.s()),
              "D2H kept count");
      sh.Call(cudaStreamSynchronize(s.s()), "cudaStreamSynchronize");
      uint64_t kept = 0;
      std::memcpy(&kept, s.h_count.get(), sizeof(kept));
      if (kept > m) sh.Call(cudaErrorIllegalState, "compact kernel reported more kept than it was given");
      if (spec_.want_values && kept) {
        sh.Call(cudaMemcpyAsync(s.h_out.get(), s.d_out.get(), kept * sizeof(T), cudaMemcpyDeviceToHost, s.s()),
                "D2H kept values");
      }
      if (spec_.want_indices && kept) {
        sh.Call(cudaMemcpyAsync(s.h_idx.get(), s.d_idx.get(), kept * sizeof(int64_t), cudaMemcpyDeviceToHost, s.s()),
                "D2H kept indices");
      }
      sh.Call(cudaEventRecord(s.d2h_done.get(), s.s()), "cudaEventRecord");
      s.busy = true;
      s.downloads = true;
      Retire(sh, s, times);
      if (spec_.want_values) {
        std::memcpy(static_cast<char*>(out_values) + kept_total * sizeof(T), s.h_out.get(), kept * sizeof(T));
      }
      if (spec_.want_indices) std::memcpy(out_indices + kept_total, s.h_idx.get(), kept * sizeof(int64_t));
      kept_total += kept;
    }
    processed_ += n;
    return kept_total;
  }

  std::string algorithm() const override { return "single_pass"; }

 private:
  std::shared_ptr<Shared> sh_;
  CompactSpec spec_;
  kernels::Predicate<T> pred_;
  uint64_t processed_ = 0;
};

}  // namespace

std::unique_ptr<CompactSession> NewCompact(const std::shared_ptr<Shared>& sh, const CompactSpec& spec) {
  return VisitDType(spec.dtype, [&](auto t) -> std::unique_ptr<CompactSession> {
    return std::make_unique<CudaCompact<typename decltype(t)::type>>(sh, spec);
  });
}

}  // namespace gpuscan::engine::cuda
