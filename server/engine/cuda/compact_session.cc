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

  // Sub-chunks alternate between the pair's two slots with a lag of one: sub-chunk k is uploaded
  // and compacted (and its kept count copied back) before the host waits for sub-chunk k-1's
  // count and enqueues its kept values and indices out, so k's upload runs beside k-1's download.
  // Sub-chunks are independent (each kernel starts at index base processed_ + off and writes its
  // slot's buffers from 0); the host places their outputs in order. Outputs in registered memory
  // (shared-memory regions) are copied straight to their place, others through the slot's staging.
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
    const bool direct_values = spec_.want_values && sh.Pinned(out_values, n * sizeof(T));
    const bool direct_indices = spec_.want_indices && sh.Pinned(out_indices, n * sizeof(int64_t));
    const char* src = static_cast<const char*>(values);
    Out outs[2];
    uint64_t kept_total = 0;
    int pending = -1;  // the slot whose count is on its way back
    auto finish = [&](int i) {  // sub-chunk in slot i: its count, then its outputs on their way
      Slot& s = pair->slots[i];
      sh.Call(cudaStreamSynchronize(s.s()), "cudaStreamSynchronize");  // its count is back
      uint64_t kept = 0;
      std::memcpy(&kept, s.h_count.get(), sizeof(kept));
      if (kept > outs[i].elements) sh.Call(cudaErrorIllegalState, "compact kernel reported more kept than it was given");
      Out& o = outs[i];
      o.kept = kept;
      o.at = kept_total;
      kept_total += kept;
      if (spec_.want_values && kept) {
        void* to = direct_values ? static_cast<char*>(out_values) + o.at * sizeof(T) : s.h_out.get();
        sh.Call(cudaMemcpyAsync(to, s.d_out.get(), kept * sizeof(T), cudaMemcpyDeviceToHost, s.s()), "D2H kept values");
      }
      if (spec_.want_indices && kept) {
        void* to = direct_indices ? static_cast<void*>(out_indices + o.at) : s.h_idx.get();
        sh.Call(cudaMemcpyAsync(to, s.d_idx.get(), kept * sizeof(int64_t), cudaMemcpyDeviceToHost, s.s()),
                "D2H kept indices");
      }
      sh.Call(cudaEventRecord(s.d2h_done.get(), s.s()), "cudaEventRecord");
      o.downloading = true;
    };
    auto place = [&](int i) {  // sub-chunk in slot i: downloaded; staged outputs to their place
      Slot& s = pair->slots[i];
      Out& o = outs[i];
      if (!o.downloading) return;
      sh.Call(cudaEventSynchronize(s.d2h_done.get()), "cudaEventSynchronize");
      if (spec_.want_values && !direct_values) {
        std::memcpy(static_cast<char*>(out_values) + o.at * sizeof(T), s.h_out.get(), o.kept * sizeof(T));
      }
      if (spec_.want_indices && !direct_indices) std::memcpy(out_indices + o.at, s.h_idx.get(), o.kept * sizeof(int64_t));
      times.h2d_us += ElapsedUs(s.start.get(), s.h2d_done.get());
      times.kernel_us += ElapsedUs(s.kernel_start.get(), s.kernel_done.get());
      times.d2h_us += ElapsedUs(s.kernel_done.get(), s.d2h_done.get());
      o.downloading = false;
    };
    unsigned k = 0;
    for (uint64_t off = 0; off < n; off += sub, ++k) {
      const int i = static_cast<int>(k & 1);
      Slot& s = pair->slots[i];
      place(i);  // sub-chunk k-2's outputs: its slot is reused now
      const uint64_t m = std::min(sub, n - off);
      outs[i].elements = m;
      Upload(sh, s, src + off * sizeof(T), m * sizeof(T), spec_.use_flags ? flags + off : nullptr, m);
      KernelBegin(sh, *pair, s);  // after the other slot's kernel: they share the temporary storage
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
      if (pending >= 0) finish(pending);  // k-1's outputs go out while k is uploaded and compacted
      pending = i;
    }
    finish(pending);
    place(0);
    place(1);
    pair->last_kernel = nullptr;  // both slots are idle
    processed_ += n;
    return kept_total;
  }

  // One kernel over the whole array where it lies; only the kept count comes back.
  uint64_t ProcessDevice(const void* values, const uint8_t* flags, uint64_t n, void* out_values,
                         int64_t* out_indices, StageTimes& times) override {
    if (n == 0) return 0;
    Shared& sh = *sh_;
    DeviceGuard guard(sh);
    StagingLease pair(sh);
    Slot& s = pair->slots[0];
    size_t temp_bytes = 0;
    sh.Call(kernels::Compact<T>(false, nullptr, temp_bytes, nullptr, nullptr, pred_, n, 0, nullptr, nullptr, nullptr,
                                s.s()),
            "compact temp size");
    pair->EnsureTemp(temp_bytes);
    RunOnDevice(sh, *pair, times, [&](cudaStream_t stream) {
      size_t bytes = pair->temp.size();
      sh.Call(kernels::Compact<T>(false, pair->temp.get(), bytes, static_cast<const T*>(values),
                                  spec_.use_flags ? flags : nullptr, pred_, n, static_cast<int64_t>(processed_),
                                  spec_.want_values ? static_cast<T*>(out_values) : nullptr,
                                  spec_.want_indices ? out_indices : nullptr, static_cast<uint64_t*>(s.d_count.get()),
                                  stream),
              "compact kernel");
      sh.Call(cudaMemcpyAsync(s.h_count.get(), s.d_count.get(), sizeof(uint64_t), cudaMemcpyDeviceToHost, stream),
              "D2H kept count");
    });
    uint64_t kept = 0;
    std::memcpy(&kept, s.h_count.get(), sizeof(kept));
    if (kept > n) sh.Call(cudaErrorIllegalState, "compact kernel reported more kept than it was given");
    processed_ += n;
    return kept;
  }

  std::string algorithm() const override { return "single_pass"; }

 private:
  // A slot's sub-chunk in flight: its length, what it kept and where that goes in the outputs.
  struct Out {
    uint64_t elements = 0, kept = 0, at = 0;
    bool downloading = false;
  };

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
