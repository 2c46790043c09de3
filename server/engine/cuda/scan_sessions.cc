// Scan and reduce sessions of the CUDA engine: the look-back family, and the deterministic tree for float SUM/PRODUCT.
#include "engine/cuda/sessions.h"

#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <type_traits>

#include "engine/carry_fold.h"
#include "engine/cuda/tree_sessions.h"
#include "gpuscan/kernels/fold.h"
#include "gpuscan/kernels/reduce.h"
#include "gpuscan/kernels/scan.h"

namespace gpuscan::engine::cuda {

namespace {

kernels::ScanAlgorithm ToKernels(ScanAlgorithm a) {
  switch (a) {
    case ScanAlgorithm::kDefault:
    case ScanAlgorithm::kDecoupledLookback: return kernels::ScanAlgorithm::kDecoupledLookback;
    case ScanAlgorithm::kChained: return kernels::ScanAlgorithm::kChained;
    case ScanAlgorithm::kReduceThenScan: return kernels::ScanAlgorithm::kReduceThenScan;
    case ScanAlgorithm::kKoggeStone: return kernels::ScanAlgorithm::kKoggeStone;
    case ScanAlgorithm::kBrentKung: return kernels::ScanAlgorithm::kBrentKung;
    case ScanAlgorithm::kBlelloch: return kernels::ScanAlgorithm::kBlelloch;
    case ScanAlgorithm::kHillisSteele: return kernels::ScanAlgorithm::kHillisSteele;
    case ScanAlgorithm::kCub: return kernels::ScanAlgorithm::kCub;
    case ScanAlgorithm::kDeterministic: return kernels::ScanAlgorithm::kDecoupledLookback;  // exact pairs
    case ScanAlgorithm::kCpuBlocked: break;
  }
  throw Error(ErrorCode::kUnimplemented, "scan algorithm '" + std::string(Name(a)) +
                                             "' is not available on the cuda engine");
}

// Integer scans under the default algorithm whose leading chunks are small run those chunks on
// the host: for a few KiB the GPU round trip (two copies, a launch, an event wait: ~50 us)
// costs more than the scan (~1 us a KiB). Integer operators are exact, so the bits are the
// GPU's. Once a chunk has gone to the device the carry lives there and every later chunk
// follows it; a host carry is uploaded before the first device chunk.
constexpr uint64_t kHostChunkBytes = 16 << 10;

template <class T, class Op>
class CudaScan final : public ScanSession {
 public:
  CudaScan(std::shared_ptr<Shared> sh, kernels::ScanAlgorithm algo, bool exclusive, bool host_small)
      : sh_(std::move(sh)), algo_(algo), exclusive_(exclusive), host_small_(host_small && std::is_integral_v<T>) {}

  ~CudaScan() override {
    if (held_) {  // chunks begun and never ended (the call failed): let the pair go idle first
      cudaSetDevice(sh_->device);
      (*held_)->Quiesce();
    }
  }

  void Process(const void* in, void* out, uint64_t n, StageTimes& times) override {
    if (n == 0) return;
    if (OnHost(n)) return HostScan(in, out, n, times);
    Shared& sh = *sh_;
    DeviceGuard guard(sh);
    // A chunk begun on the held pair is retired by RunPipelined before its slot is reused.
    std::optional<StagingLease> own;
    StagingPair& pair = held_ ? **held_ : *own.emplace(sh);
    for (Slot& s : pair.slots) Retire(sh, s, times);  // a begun chunk, before temp storage may move
    PrepareTemp(pair, std::min<uint64_t>(n, kSubChunkBytes / sizeof(T)));
    const size_t bytes = n * sizeof(T);
    if (n > kSubChunkBytes / sizeof(T) && sh.Pinned(in, bytes) && sh.Pinned(out, bytes)) {
      RunDirect<T>(sh, pair, in, out, n, times, [&](T* d, uint64_t m, cudaStream_t stream) {
        Launch(pair, d, d, m, stream);
      });
    } else {
      RunPipelined<T>(sh, pair, in, out, n, times, [&](Slot& s, uint64_t m) {
        Launch(pair, static_cast<const T*>(s.d_in.get()), static_cast<T*>(s.d_out.get()), m, s.s());
      });
    }
    held_.reset();  // both slots retired
  }

  void ProcessDevice(const void* in, void* out, uint64_t n, StageTimes& times) override {
    if (n == 0) return;
    Shared& sh = *sh_;
    DeviceGuard guard(sh);
    StagingLease pair(sh);
    PrepareTemp(*pair, n);
    RunOnDevice(sh, *pair, times, [&](cudaStream_t stream) {
      Launch(*pair, static_cast<const T*>(in), static_cast<T*>(out), n, stream);
    });
  }

  // Pipelined: a chunk of at most one sub-chunk takes the next slot of a pair held while chunks
  // are in flight, so its copies and kernel overlap the caller's work on the chunk before.
  // End(k) may run on another thread during Begin(k+1): they use different slots, and mu_
  // guards which slots are taken and the held pair.
  uint64_t Begin(const void* in, void* out, uint64_t n, StageTimes& times) override {
    if (n == 0) return 0;
    if (OnHost(n)) {
      HostScan(in, out, n, times);
      return 0;
    }
    if (n * sizeof(T) > kSubChunkBytes) {
      Process(in, out, n, times);
      return 0;
    }
    Shared& sh = *sh_;
    DeviceGuard guard(sh);
    StagingPair* pair = nullptr;
    Slot* s = nullptr;
    uint64_t ticket = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!held_) {
        // Temporary storage for any chunk this pipeline may take, while none is in flight.
        PrepareTemp(*held_.emplace(sh), kSubChunkBytes / sizeof(T));
      }
      pair = &**held_;
      s = &pair->slots[next_slot_];
      if (s->busy) Retire(sh, *s, times);  // only when the caller ended nothing in between
      s->busy = true;                      // taken: End of the other slot keeps the pair
      s->ticket = ticket = ++tickets_;
      next_slot_ ^= 1;
    }
    Upload(sh, *s, in, n * sizeof(T), nullptr, 0);
    KernelBegin(sh, *pair, *s);
    Launch(*pair, static_cast<const T*>(s->d_in.get()), static_cast<T*>(s->d_out.get()), n, s->s());
    KernelEnd(sh, *pair, *s);
    Download(sh, *s, static_cast<char*>(out), n * sizeof(T));
    return ticket;
  }

  void End(uint64_t ticket, StageTimes& times) override {
    if (ticket == 0) return;
    Shared& sh = *sh_;
    DeviceGuard guard(sh);
    Slot* s = nullptr;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!held_) return;
      for (Slot& slot : (*held_)->slots) {
        if (slot.busy && slot.ticket == ticket) s = &slot;
      }
    }
    if (s) Retire(sh, *s, times);  // waits and copies out, unlocked: Begin may fill the other slot
    std::lock_guard<std::mutex> lock(mu_);
    if (held_ && !(*held_)->slots[0].busy && !(*held_)->slots[1].busy) held_.reset();  // give the pair back
  }

  uint64_t overlap_elements() const override { return kSubChunkBytes / sizeof(T); }
  bool on_host(uint64_t n) const override { return n == 0 || (n * sizeof(T) <= kSmallChunkBytes && OnHost(n)); }

  std::string algorithm() const override { return kernels::ScanAlgorithmName(algo_); }
  // Staged through pinned memory: a range of `out` is written only after the same range of
  // `in` was copied to the device (RunPipelined retires sub-chunk k-2 after uploading k).
  bool in_place() const override { return true; }

 private:
  bool OnHost(uint64_t n) const { return host_small_ && !carry_.valid && n * sizeof(T) <= kHostChunkBytes; }

  // The sequential scan of n elements (raw bytes, may alias), continuing the host carry; its
  // time counts as kernel time. Integer operators: starting from the identity is exact.
  void HostScan(const void* in, void* out, uint64_t n, StageTimes& times) {
    host::KernelTimer timer(times);
    const auto* src = static_cast<const unsigned char*>(in);
    auto* dst = static_cast<unsigned char*>(out);
    host_carry_ = exclusive_ ? host::ScanRange<T, Op, true>(src, dst, 0, n, host_carry_)
                             : host::ScanRange<T, Op, false>(src, dst, 0, n, host_carry_);
    host_has_ = true;
  }

  // Enqueues the scan of m elements of d_in into d_out (may alias) on `stream`, continuing the
  // device carry (the host's, uploaded first, after chunks scanned on the host).
  void Launch(StagingPair& pair, const T* d_in, T* d_out, uint64_t m, cudaStream_t stream) {
    Shared& sh = *sh_;
    T* carry = carry_.get(stream);
    if (host_has_ && !carry_.valid) {
      // Pageable source: staged before this returns; host_carry_ no longer changes anyway.
      sh.Call(cudaMemcpyAsync(carry, &host_carry_, sizeof(T), cudaMemcpyHostToDevice, stream), "H2D scan carry");
      carry_.valid = true;
    }
    size_t bytes = pair.temp.size();
    sh.Call(kernels::Scan<T, Op>(algo_, pair.temp.get(), bytes, d_in, d_out, m, exclusive_,
                                 carry_.valid ? carry : nullptr, carry, stream),
            "scan kernel");
    carry_.valid = true;
  }

  // Grows the pair's temporary storage for scans of up to m elements. Growing waits for the
  // pair (Quiesce): call it only with no chunk in flight.
  void PrepareTemp(StagingPair& pair, uint64_t m) {
    size_t temp_bytes = 0;
    sh_->Call(kernels::Scan<T, Op>(algo_, nullptr, temp_bytes, nullptr, nullptr, m, exclusive_, nullptr, nullptr,
                                      pair.slots[0].s()),
              "scan temp size");
    pair.EnsureTemp(temp_bytes);
  }

  std::shared_ptr<Shared> sh_;
  kernels::ScanAlgorithm algo_;
  bool exclusive_;
  bool host_small_;  // leading chunks of up to kHostChunkBytes on the host
  T host_carry_ = Op::identity();
  bool host_has_ = false;  // chunks were scanned on the host: the device starts from host_carry_
  DeviceCarry<T> carry_;
  std::mutex mu_;
  uint64_t tickets_ = 0;
  unsigned next_slot_ = 0;
  std::optional<StagingLease> held_;  // last: released before the carry goes
};

template <class T, class Op>
class CudaReduce final : public ReduceSession {
 public:
  explicit CudaReduce(std::shared_ptr<Shared> sh) : sh_(std::move(sh)) {}

  void Process(const void* in, uint64_t n, StageTimes& times) override {
    if (n == 0) return;
    Shared& sh = *sh_;
    DeviceGuard guard(sh);
    StagingLease pair(sh);
    const uint64_t sub = kSubChunkBytes / sizeof(T);
    size_t temp_bytes = 0;
    sh.Call(kernels::Reduce<T, Op>(false, nullptr, temp_bytes, nullptr, std::min(n, sub), nullptr, nullptr,
                                   pair->slots[0].s()),
            "reduce temp size");
    pair->EnsureTemp(temp_bytes);
    T* carry = carry_.get(pair->slots[0].s());
    auto launch = [&](const T* d_in, uint64_t m, cudaStream_t stream) {
      size_t bytes = pair->temp.size();
      sh.Call(kernels::Reduce<T, Op>(false, pair->temp.get(), bytes, d_in, m, carry_.valid ? carry : nullptr, carry,
                                     stream),
              "reduce kernel");
      carry_.valid = true;
    };
    if (n > sub && sh.Pinned(in, n * sizeof(T))) {
      RunDirect<T>(sh, *pair, in, nullptr, n, times, launch);
    } else {
      RunPipelined<T>(sh, *pair, in, nullptr, n, times,
                      [&](Slot& s, uint64_t m) { launch(static_cast<const T*>(s.d_in.get()), m, s.s()); });
    }
  }

  void ProcessDevice(const void* in, uint64_t n, StageTimes& times) override {
    if (n == 0) return;
    Shared& sh = *sh_;
    DeviceGuard guard(sh);
    StagingLease pair(sh);
    size_t temp_bytes = 0;
    sh.Call(kernels::Reduce<T, Op>(false, nullptr, temp_bytes, nullptr, n, nullptr, nullptr, pair->slots[0].s()),
            "reduce temp size");
    pair->EnsureTemp(temp_bytes);
    RunOnDevice(sh, *pair, times, [&](cudaStream_t stream) {
      T* carry = carry_.get(stream);
      size_t bytes = pair->temp.size();
      sh.Call(kernels::Reduce<T, Op>(false, pair->temp.get(), bytes, static_cast<const T*>(in), n,
                                     carry_.valid ? carry : nullptr, carry, stream),
              "reduce kernel");
      carry_.valid = true;
    });
  }

  void Result(void* value) const override {
    T v = Op::identity();
    if (carry_.valid) {
      DeviceGuard guard(*sh_);
      sh_->Call(cudaMemcpy(&v, carry_.ptr(), sizeof(T), cudaMemcpyDeviceToHost),
                "D2H result");
    }
    std::memcpy(value, &v, sizeof(T));
  }

  std::string algorithm() const override { return "one_pass"; }

 private:
  std::shared_ptr<Shared> sh_;
  DeviceCarry<T> carry_;
};

// A carry folded into a whole array's results on the device (engine/carry_fold.h): one more
// pass over them, after the scan.
void FoldOnDevice(Shared& sh, const ScanSpec& spec, void* out, uint64_t n, StageTimes& times) {
  Visit(spec.dtype, spec.op, [&](auto t, auto op) {
    using T = typename decltype(t)::type;
    using Op = typename decltype(op)::type;
    T carry;
    std::memcpy(&carry, &*spec.carry, sizeof(T));
    DeviceGuard guard(sh);
    StagingLease pair(sh);
    RunOnDevice(sh, *pair, times, [&](cudaStream_t stream) {
      sh.Call(kernels::FoldCarry<T, Op>(static_cast<T*>(out), n, carry, spec.exclusive, stream), "carry fold kernel");
    });
  });
}

// The scan session for spec, without its carry.
std::unique_ptr<ScanSession> NewPlainScan(const std::shared_ptr<Shared>& sh, const ScanSpec& spec) {
  const kernels::ScanAlgorithm algo = ToKernels(spec.algorithm);
  return Visit(spec.dtype, spec.op, [&](auto t, auto op) -> std::unique_ptr<ScanSession> {
    using T = typename decltype(t)::type;
    using Op = typename decltype(op)::type;
    // Float SUM/PRODUCT: the canonical tree by default; a named algorithm runs as asked
    // (and its float bits may change from run to run and with the chunking).
    if constexpr (canon::kUsesTree<T, Op>) {
      if (spec.algorithm == ScanAlgorithm::kDefault || spec.algorithm == ScanAlgorithm::kDeterministic) {
        if (spec.exclusive) return std::make_unique<CudaTreeScan<T, Op, true>>(sh);
        return std::make_unique<CudaTreeScan<T, Op, false>>(sh);
      }
    }
    return std::make_unique<CudaScan<T, Op>>(sh, algo, spec.exclusive, spec.algorithm == ScanAlgorithm::kDefault);
  });
}

}  // namespace

std::unique_ptr<ScanSession> NewScan(const std::shared_ptr<Shared>& sh, const ScanSpec& spec) {
  return WithCarry(NewPlainScan(sh, spec), spec, [sh, spec](void* out, uint64_t n, StageTimes& times) {
    FoldOnDevice(*sh, spec, out, n, times);
  });
}

std::unique_ptr<ReduceSession> NewReduce(const std::shared_ptr<Shared>& sh, const ReduceSpec& spec) {
  return Visit(spec.dtype, spec.op, [&](auto t, auto op) -> std::unique_ptr<ReduceSession> {
    using T = typename decltype(t)::type;
    using Op = typename decltype(op)::type;
    if constexpr (canon::kUsesTree<T, Op>) return std::make_unique<CudaTreeReduce<T, Op>>(sh);
    return std::make_unique<CudaReduce<T, Op>>(sh);
  });
}

}  // namespace gpuscan::engine::cuda
