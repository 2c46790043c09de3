// Segmented scan and reduce-by-key sessions of the CUDA engine.
#include "engine/cuda/sessions.h"

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <type_traits>

#include "engine/cuda/tree_sessions.h"
#include "gpuscan/kernels/reduce_by_key.h"
#include "gpuscan/kernels/segmented_scan.h"

namespace gpuscan::engine::cuda {

namespace {

// ---------------------------------------------------------------------------------------------
// Segmented scan (exact operators): values and keys go up side by side, kernels::SegmentedScan
// forms the segment heads on the device and scans in one pass, the carry (last value and key)
// stays on the device between sub-chunks and calls.

template <class T, class Op>
class CudaSegmentedScan final : public SegmentedScanSession {
 public:
  CudaSegmentedScan(std::shared_ptr<Shared> sh, const SegmentedScanSpec& spec)
      : sh_(std::move(sh)), spec_(spec), key_size_(SegmentKeyBytes(spec)) {}

  void Process(const void* values, const void* keys, void* out, uint64_t n, StageTimes& times) override {
    if (n == 0) return;
    if (values == nullptr || keys == nullptr || out == nullptr) {
      throw Error(ErrorCode::kInvalidArgument, "null segmented scan buffer");
    }
    Shared& sh = *sh_;
    DeviceGuard guard(sh);
    StagingLease pair(sh);
    size_t temp_bytes = 0;
    sh.Call(Run(nullptr, temp_bytes, nullptr, nullptr, nullptr, std::min(n, SubChunkElements<T>(key_size_)), nullptr,
                nullptr, pair->slots[0].s()),
            "segmented scan temp size");
    pair->EnsureTemp(temp_bytes);
    RunPipelined<T>(
        sh, *pair, values, out, n, times,
        [&](Slot& s, uint64_t m) {
          auto* carry = carry_.get(s.s());
          size_t bytes = pair->temp.size();
          sh.Call(Run(pair->temp.get(), bytes, static_cast<const T*>(s.d_in.get()), s.d_idx.get(),
                      static_cast<T*>(s.d_out.get()), m, carry_.valid ? carry : nullptr, carry, s.s()),
                  "segmented scan kernel");
          carry_.valid = true;
        },
        keys, key_size_);
  }

  void ProcessDevice(const void* values, const void* keys, void* out, uint64_t n, StageTimes& times) override {
    if (n == 0) return;
    Shared& sh = *sh_;
    DeviceGuard guard(sh);
    StagingLease pair(sh);
    size_t temp_bytes = 0;
    sh.Call(Run(nullptr, temp_bytes, nullptr, nullptr, nullptr, n, nullptr, nullptr, pair->slots[0].s()),
            "segmented scan temp size");
    pair->EnsureTemp(temp_bytes);
    RunOnDevice(sh, *pair, times, [&](cudaStream_t stream) {
      auto* carry = carry_.get(stream);
      size_t bytes = pair->temp.size();
      sh.Call(Run(pair->temp.get(), bytes, static_cast<const T*>(values), keys, static_cast<T*>(out), n,
                  carry_.valid ? carry : nullptr, carry, stream),
              "segmented scan kernel");
      carry_.valid = true;
    });
  }

  std::string algorithm() const override { return "segmented_single_pass"; }

 private:
  using Carry = kernels::SegmentCarry<T>;
  // The kernel for the spec's kind of key: head bytes, or 4- or 8-byte key bits.
  cudaError_t Run(void* temp, size_t& bytes, const T* in, const void* keys, T* out, uint64_t n, const Carry* carry_in,
                  Carry* carry_out, cudaStream_t stream) const {
    auto run = [&](auto key) {
      using K = decltype(key);
      return kernels::SegmentedScan<T, Op, K>(temp, bytes, in, static_cast<const K*>(keys), out, n, spec_.exclusive,
                                              carry_in, carry_out, stream);
    };
    if (spec_.heads) return run(uint8_t{});
    return key_size_ == 4 ? run(uint32_t{}) : run(uint64_t{});
  }

  std::shared_ptr<Shared> sh_;
  SegmentedScanSpec spec_;
  size_t key_size_;
  DeviceCarry<Carry> carry_;
};

// ---------------------------------------------------------------------------------------------
// Reduce by key of 4-byte values (kernels::ReduceByKey): each sub-chunk's values and keys go up,
// the kernel writes the runs that close inside it, and only those come back. The run open at a
// sub-chunk's end lives in the device carry; the host keeps a copy of it (read with the run
// count after each sub-chunk) to emit it when the next key differs, or at Finish. One
// sub-chunk at a time: its run count decides what to copy back.

template <class T, class Op>
class CudaReduceByKey final : public ReduceByKeySession {
 public:
  CudaReduceByKey(std::shared_ptr<Shared> sh, const SegmentedScanSpec& spec)
      : sh_(std::move(sh)), key_size_(SizeOf(spec.key_dtype)) {
    if (IsFloat(spec.key_dtype)) {
      throw Error(ErrorCode::kInvalidArgument,
                  "segment keys must be an integer dtype, not " + std::string(Name(spec.key_dtype)));
    }
  }

  uint64_t Process(const void* values, const void* keys, uint64_t n, std::string* keys_out, std::string* values_out,
                   StageTimes& times) override {
    if (n == 0) return 0;
    Shared& sh = *sh_;
    DeviceGuard guard(sh);
    StagingLease pair(sh);
    // The runs of a sub-chunk (at most one per element) come back through d_out: values, then
    // keys from the next 16-byte boundary (8-byte keys must be aligned).
    const uint64_t sub = (kSubChunkBytes - 16) / (sizeof(T) + key_size_);
    size_t temp_bytes = 0;
    sh.Call(Run(nullptr, temp_bytes, nullptr, nullptr, nullptr, nullptr, std::min(n, sub), nullptr, nullptr, nullptr),
            "reduce by key temp size");
    pair->EnsureTemp(temp_bytes);
    Slot& s = pair->slots[0];
    const auto* v = static_cast<const char*>(values);
    const auto* k = static_cast<const char*>(keys);
    auto* carry = carry_.get(s.s());
    uint64_t runs_total = 0;
    for (uint64_t off = 0; off < n; off += sub) {
      const uint64_t m = std::min(sub, n - off);
      // The open run closed before this sub-chunk when its first key differs.
      if (host_carry_.started && !SameKey(k + off * key_size_, host_carry_.last_key)) {
        runs_total += Emit(keys_out, values_out);
      }
      Upload(sh, s, v + off * sizeof(T), m * sizeof(T), k + off * key_size_, m * key_size_, s.h_idx, s.d_idx.get());
      KernelBegin(sh, *pair, s);
      auto* out_values = static_cast<T*>(s.d_out.get());
      const size_t keys_at = (m * sizeof(T) + 15) / 16 * 16;
      auto* out_keys = static_cast<char*>(s.d_out.get()) + keys_at;
      size_t bytes = pair->temp.size();
      sh.Call(Run(pair->temp.get(), bytes, static_cast<const T*>(s.d_in.get()), s.d_idx.get(), out_keys, out_values, m,
                  carry_.valid ? carry : nullptr, carry, s.s()),
              "reduce by key kernel");
      carry_.valid = true;
      KernelEnd(sh, *pair, s);
      sh.Call(cudaMemcpyAsync(s.h_out.get(), carry, sizeof(Carry), cudaMemcpyDeviceToHost, s.s()),
              "D2H run count and carry");
      sh.Call(cudaStreamSynchronize(s.s()), "cudaStreamSynchronize");
      std::memcpy(&host_carry_, s.h_out.get(), sizeof(Carry));
      const uint64_t runs = host_carry_.runs;
      if (runs > m) sh.Call(cudaErrorIllegalState, "reduce by key kernel reported more runs than elements");
      if (runs) {
        const size_t vbytes = runs * sizeof(T), kbytes = runs * key_size_;
        sh.Call(cudaMemcpyAsync(s.h_out.get(), out_values, vbytes, cudaMemcpyDeviceToHost, s.s()), "D2H run values");
        sh.Call(cudaMemcpyAsync(static_cast<char*>(s.h_out.get()) + keys_at, out_keys, kbytes, cudaMemcpyDeviceToHost,
                                s.s()),
                "D2H run keys");
      }
      sh.Call(cudaEventRecord(s.d2h_done.get(), s.s()), "cudaEventRecord");
      s.busy = true;
      s.downloads = true;
      Retire(sh, s, times);
      if (runs) {
        const auto* h = static_cast<const char*>(s.h_out.get());
        values_out->append(h, runs * sizeof(T));
        keys_out->append(h + keys_at, runs * key_size_);
      }
      runs_total += runs;
    }
    return runs_total;
  }

  uint64_t Finish(std::string* keys_out, std::string* values_out) override {
    return host_carry_.started ? Emit(keys_out, values_out) : 0;
  }
  std::string algorithm() const override { return "reduce_by_key_single_pass"; }

 private:
  using Carry = kernels::RunCarry<T>;

  bool SameKey(const char* key, uint64_t bits) const {
    uint64_t k = 0;
    std::memcpy(&k, key, key_size_);  // little-endian: the low bytes
    return k == bits;
  }
  // Appends the open run (the host's copy of the carry) and closes it.
  uint64_t Emit(std::string* keys_out, std::string* values_out) {
    keys_out->append(reinterpret_cast<const char*>(&host_carry_.last_key), key_size_);
    values_out->append(reinterpret_cast<const char*>(&host_carry_.value), sizeof(T));
    host_carry_.started = 0;
    return 1;
  }
  cudaError_t Run(void* temp, size_t& bytes, const T* in, const void* keys, void* keys_out, T* values_out, uint64_t n,
                  const Carry* carry_in, Carry* carry_out, cudaStream_t stream) const {
    auto run = [&](auto key) {
      using K = decltype(key);
      return kernels::ReduceByKey<T, Op, K>(temp, bytes, in, static_cast<const K*>(keys), static_cast<K*>(keys_out),
                                            values_out, n, false, carry_in, carry_out, stream);
    };
    return key_size_ == 4 ? run(uint32_t{}) : run(uint64_t{});
  }

  std::shared_ptr<Shared> sh_;
  size_t key_size_;
  DeviceCarry<Carry> carry_;
  Carry host_carry_{};  // started == 0: no run open
};

// A segmented scan run on the host (see CudaEngine::NewSegmentedScan), named as such.
class HostSegmentedScan final : public SegmentedScanSession {
 public:
  explicit HostSegmentedScan(std::unique_ptr<SegmentedScanSession> s) : s_(std::move(s)) {}
  void Process(const void* values, const void* keys, void* out, uint64_t n, StageTimes& t) override {
    s_->Process(values, keys, out, n, t);
  }
  std::string algorithm() const override { return s_->algorithm() + "_host"; }

 private:
  std::unique_ptr<SegmentedScanSession> s_;
};

}  // namespace

// Exact operators: the fused single-pass kernel. Float32 SUM/PRODUCT: (head, value) pairs packed
// on the host through the canonical tree on the device. float64 pairs (16 bytes) do not fit the
// canonical kernels' static shared memory, so float64 SUM/PRODUCT run the same tree on the host
// (the CPU engine's code; same bits), named "..._host" in Timing.
std::unique_ptr<SegmentedScanSession> NewSegmentedScan(const std::shared_ptr<Shared>& sh,
                                                       const SegmentedScanSpec& spec) {
  return Visit(spec.dtype, spec.op, [&](auto t, auto o) -> std::unique_ptr<SegmentedScanSession> {
    using T = typename decltype(t)::type;
    using O = typename decltype(o)::type;
    if constexpr (canon::kUsesTree<T, O>) {
      if constexpr (sizeof(T) == 8) {
        return std::make_unique<HostSegmentedScan>(NewHostSegmentedScan(spec));
      } else {
        auto pairs = std::make_unique<CudaTreeScan<seg::SegItem<T>, seg::SegOp<T, O>, false>>(sh);
        return std::make_unique<PairSegmentedScan<T, O>>(spec, std::move(pairs));
      }
    } else {
      return std::make_unique<CudaSegmentedScan<T, O>>(sh, spec);
    }
  });
}

// 4-byte values under exact operators: the fused kernel; nullptr for the rest, which the engine
// serves by picking the runs out of the segmented scan (Engine's default).
std::unique_ptr<ReduceByKeySession> NewReduceByKey(const std::shared_ptr<Shared>& sh, const SegmentedScanSpec& spec) {
  return Visit(spec.dtype, spec.op, [&](auto t, auto o) -> std::unique_ptr<ReduceByKeySession> {
    using T = typename decltype(t)::type;
    using O = typename decltype(o)::type;
    if constexpr (sizeof(T) == 4 && !canon::kUsesTree<T, O>) {
      return std::make_unique<CudaReduceByKey<T, O>>(sh, spec);
    } else {
      return nullptr;
    }
  });
}

}  // namespace gpuscan::engine::cuda
