#include "engine/carry_fold.h"

#include <cstring>
#include <mutex>
#include <utility>
#include <vector>

#include "engine/dispatch.h"
#include "engine/host_scan.h"

namespace gpuscan::engine {

void FoldCarry(const ScanSpec& spec, void* out, uint64_t n, uint64_t first) {
  if (!spec.carry || n == 0) return;
  Visit(spec.dtype, spec.op, [&](auto t, auto o) {
    using T = typename decltype(t)::type;
    using Op = typename decltype(o)::type;
    T carry;
    std::memcpy(&carry, &*spec.carry, sizeof(T));
    auto* p = static_cast<unsigned char*>(out);
    const Op op;
    for (uint64_t i = 0; i < n; ++i) host::Store<T>(p, i, op(carry, host::Load<T>(p, i)));
    // Not op(carry, identity): a float sum would turn a -0.0 carry into +0.0.
    if (spec.exclusive && first == 0) host::Store<T>(p, 0, carry);
  });
}

namespace {

class CarryScan final : public ScanSession {
 public:
  CarryScan(std::unique_ptr<ScanSession> inner, const ScanSpec& spec, DeviceFold device)
      : inner_(std::move(inner)), spec_(spec), device_(std::move(device)) {}

  void Process(const void* in, void* out, uint64_t n, StageTimes& times) override {
    inner_->Process(in, out, n, times);
    Fold(out, n, next_, times);
    next_ += n;
  }

  bool in_place() const override { return inner_->in_place(); }

  // A chunk the inner session ran in Begin (ticket 0) is folded now; one it ends later, at End.
  // End(k) may run on another thread during Begin(k+1): mu_ guards the chunks not yet ended.
  uint64_t Begin(const void* in, void* out, uint64_t n, StageTimes& times) override {
    const uint64_t ticket = inner_->Begin(in, out, n, times);
    const uint64_t first = next_;
    next_ += n;
    if (ticket == 0) {
      Fold(out, n, first, times);
    } else {
      std::lock_guard<std::mutex> lock(mu_);
      begun_.push_back({ticket, out, n, first});
    }
    return ticket;
  }

  void End(uint64_t ticket, StageTimes& times) override {
    inner_->End(ticket, times);
    if (ticket == 0) return;
    Chunk c{};
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto it = begun_.begin(); it != begun_.end(); ++it) {
        if (it->ticket == ticket) {
          c = *it;
          begun_.erase(it);
          break;
        }
      }
    }
    if (c.ticket) Fold(c.out, c.n, c.first, times);
  }

  void ProcessDevice(const void* in, void* out, uint64_t n, StageTimes& times) override {
    inner_->ProcessDevice(in, out, n, times);
    if (n) device_(out, n, times);
    next_ += n;
  }

  uint64_t overlap_elements() const override { return inner_->overlap_elements(); }
  bool on_host(uint64_t n) const override { return inner_->on_host(n); }
  std::string algorithm() const override { return inner_->algorithm(); }

 private:
  struct Chunk {
    uint64_t ticket;
    void* out;
    uint64_t n;
    uint64_t first;
  };

  void Fold(void* out, uint64_t n, uint64_t first, StageTimes& times) {
    host::KernelTimer timer(times);
    FoldCarry(spec_, out, n, first);
  }

  std::unique_ptr<ScanSession> inner_;
  ScanSpec spec_;
  DeviceFold device_;
  uint64_t next_ = 0;  // the array's element the next chunk begins at
  std::mutex mu_;
  std::vector<Chunk> begun_;
};

}  // namespace

std::unique_ptr<ScanSession> WithCarry(std::unique_ptr<ScanSession> inner, const ScanSpec& spec, DeviceFold device) {
  if (!spec.carry) return inner;
  return std::make_unique<CarryScan>(std::move(inner), spec, std::move(device));
}

}  // namespace gpuscan::engine
