// Reductions on the pool: the blocked fold, and the canonical tree's (tree.h) for float
// SUM/PRODUCT.
//
// Blocked fold: fold every block (parallel) -> combine the totals in block order -> fold that
// into the session's partial result.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "engine/cpu/blocks.h"
#include "engine/cpu/sessions.h"
#include "engine/cpu/tree.h"
#include "engine/dispatch.h"

namespace gpuscan::engine::cpu {
namespace {

template <class T_, class Op>
class BlockedReducer {
 public:
  using T = T_;
  static constexpr const char* kAlgorithm = "cpu_blocked";

  void Run(Pool& pool, const unsigned char* src, uint64_t n) {
    const Blocks blocks(n);
    const Op op;
    T chunk;
    if (blocks.count == 1) {
      chunk = Fold<T, Op>(src, 0, n);
    } else {
      std::vector<T> totals(blocks.count);
      ForBlocks(pool, blocks.count, RunParallel(pool, n), [&](uint64_t b) {
        totals[b] = Fold<T, Op>(src, blocks.begin(b), blocks.end(b));
      });
      chunk = totals[0];
      for (uint64_t b = 1; b < blocks.count; ++b) chunk = op(chunk, totals[b]);
    }
    partial_ = op(partial_, chunk);
  }
  T total() const { return partial_; }

 private:
  T partial_ = Op::identity();
};

// A reduce session over a Reducer (BlockedReducer, TreeReducer), which keeps the partial result
// between chunks.
template <class Reducer>
class CpuReduce final : public ReduceSession {
  using T = typename Reducer::T;

 public:
  explicit CpuReduce(std::shared_ptr<Pool> pool) : pool_(std::move(pool)) {}

  void Process(const void* in, uint64_t n, StageTimes& times) override {
    if (n == 0) return;
    CheckBuffer(in, n, "input");
    KernelTimer timer(times);
    reducer_.Run(*pool_, static_cast<const unsigned char*>(in), n);
  }
  // The cpu engine's "device" memory is host memory (a resident array), in pieces as a scan's.
  void ProcessDevice(const void* in, uint64_t n, StageTimes& times) override {
    const uint64_t piece = kResidentPieceBytes / sizeof(T);
    for (uint64_t at = 0; at < n; at += piece) Process(static_cast<const T*>(in) + at, std::min(piece, n - at), times);
  }

  void Result(void* value) const override {
    const T v = reducer_.total();
    std::memcpy(value, &v, sizeof(T));
  }
  std::string algorithm() const override { return Reducer::kAlgorithm; }

 private:
  std::shared_ptr<Pool> pool_;
  Reducer reducer_;
};

}  // namespace

std::unique_ptr<ReduceSession> NewReduce(const std::shared_ptr<Pool>& pool, const ReduceSpec& spec) {
  return Visit(spec.dtype, spec.op, [&](auto t, auto o) -> std::unique_ptr<ReduceSession> {
    using T = typename decltype(t)::type;
    using O = typename decltype(o)::type;
    if constexpr (canon::kUsesTree<T, O>) return std::make_unique<CpuReduce<TreeReducer<T, O>>>(pool);
    return std::make_unique<CpuReduce<BlockedReducer<T, O>>>(pool);
  });
}

}  // namespace gpuscan::engine::cpu
