// Scans on the pool: the blocked scan, the canonical tree's (tree.h), and the segmented scan
// over either (engine/segmented_scan.h).
//
// Blocked scan: fold every block but the last (parallel) -> scan the block totals from the
// session's carry (sequential, in block order) -> scan every block from its offset (parallel).
#include <algorithm>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "engine/cpu/blocks.h"
#include "engine/cpu/sessions.h"
#include "engine/cpu/tree.h"
#include "engine/dispatch.h"
#include "engine/segmented_scan.h"

namespace gpuscan::engine::cpu {
namespace {

template <class T_, class Op, bool kExclusive>
class BlockedScanner {
 public:
  using T = T_;
  static constexpr const char* kAlgorithm = "cpu_blocked";

  void Run(Pool& pool, const unsigned char* src, unsigned char* dst, uint64_t n) {
    const Blocks blocks(n);
    if (blocks.count == 1) {
      carry_ = host::ScanRange<T, Op, kExclusive>(src, dst, 0, n, carry_);
      return;
    }
    const bool parallel = RunParallel(pool, n);
    const uint64_t last = blocks.count - 1;
    // offsets[b + 1] first holds block b's total, then the scan turns it into an offset.
    std::vector<T> offsets(blocks.count);
    ForBlocks(pool, last, parallel, [&](uint64_t b) {
      offsets[b + 1] = Fold<T, Op>(src, blocks.begin(b), blocks.end(b));
    });
    const Op op;
    offsets[0] = carry_;
    for (uint64_t b = 1; b < blocks.count; ++b) offsets[b] = op(offsets[b - 1], offsets[b]);
    T end_running = carry_;
    ForBlocks(pool, blocks.count, parallel, [&](uint64_t b) {
      const T r = host::ScanRange<T, Op, kExclusive>(src, dst, blocks.begin(b), blocks.end(b), offsets[b]);
      if (b == last) end_running = r;
    });
    // The next chunk continues from the value the last element's scan reached, as if the
    // whole array had been one chunk from here on.
    carry_ = end_running;
  }

 private:
  T carry_ = Op::identity();
};

// A scan session over a Scanner (BlockedScanner, TreeScanner), which keeps the carry between
// chunks.
template <class Scanner>
class CpuScan final : public ScanSession {
  using T = typename Scanner::T;

 public:
  explicit CpuScan(std::shared_ptr<Pool> pool) : pool_(std::move(pool)) {}

  void Process(const void* in, void* out, uint64_t n, StageTimes& times) override {
    if (n == 0) return;
    CheckBuffer(in, n, "input");
    CheckBuffer(out, n, "output");
    KernelTimer timer(times);
    scanner_.Run(*pool_, static_cast<const unsigned char*>(in), static_cast<unsigned char*>(out), n);
  }
  // The cpu engine's "device" memory is host memory (a resident array): in pieces of a default
  // chunk, so the blocked scan's two passes over a piece hit the cache (one pass of a 24 MB
  // array took 25 ms, 3-9 ms in 4 MiB chunks).
  void ProcessDevice(const void* in, void* out, uint64_t n, StageTimes& times) override {
    const uint64_t piece = kResidentPieceBytes / sizeof(T);
    for (uint64_t at = 0; at < n; at += piece) {
      Process(static_cast<const T*>(in) + at, static_cast<T*>(out) + at, std::min(piece, n - at), times);
    }
  }

  std::string algorithm() const override { return Scanner::kAlgorithm; }
  bool on_host(uint64_t n) const override { return n * sizeof(T) <= kSmallChunkBytes; }
  // Begin runs the whole chunk and End has nothing left to do, so any thread may call it.
  uint64_t overlap_elements() const override { return UINT64_MAX; }

 private:
  std::shared_ptr<Pool> pool_;
  Scanner scanner_;
};

// Float SUM/PRODUCT take the canonical tree unless cpu_blocked is asked for by name; every other
// pair is exact in any association and keeps the blocked scan.
template <class T, class Op, bool kExclusive>
std::unique_ptr<ScanSession> NewScanOf(const std::shared_ptr<Pool>& pool, ScanAlgorithm algorithm) {
  if constexpr (canon::kUsesTree<T, Op>) {
    if (algorithm != ScanAlgorithm::kCpuBlocked) return std::make_unique<CpuScan<TreeScanner<T, Op, kExclusive>>>(pool);
  }
  return std::make_unique<CpuScan<BlockedScanner<T, Op, kExclusive>>>(pool);
}

}  // namespace

std::unique_ptr<ScanSession> NewScan(const std::shared_ptr<Pool>& pool, const ScanSpec& spec) {
  return Visit(spec.dtype, spec.op, [&](auto t, auto o) -> std::unique_ptr<ScanSession> {
    using T = typename decltype(t)::type;
    using O = typename decltype(o)::type;
    if (spec.exclusive) return NewScanOf<T, O, true>(pool, spec.algorithm);
    return NewScanOf<T, O, false>(pool, spec.algorithm);
  });
}

// Over (head, value) pairs: the canonical tree for float SUM/PRODUCT (reproducible), the
// blocked scan for the rest (exact in any association).
std::unique_ptr<SegmentedScanSession> NewSegmentedScan(const std::shared_ptr<Pool>& pool,
                                                       const SegmentedScanSpec& spec) {
  return Visit(spec.dtype, spec.op, [&](auto t, auto o) -> std::unique_ptr<SegmentedScanSession> {
    using T = typename decltype(t)::type;
    using O = typename decltype(o)::type;
    using Item = seg::SegItem<T>;
    using Pairs = seg::SegOp<T, O>;
    std::unique_ptr<ScanSession> pairs;
    if constexpr (canon::kUsesTree<T, O>) {
      pairs = std::make_unique<CpuScan<TreeScanner<Item, Pairs, false>>>(pool);
    } else {
      pairs = std::make_unique<CpuScan<BlockedScanner<Item, Pairs, false>>>(pool);
    }
    return std::make_unique<PairSegmentedScan<T, O>>(spec, std::move(pairs));
  });
}

}  // namespace gpuscan::engine::cpu
