// CPU engine: each chunk is cut into fixed blocks of CpuEngine::kBlockElems elements.
//
//   scan:    fold every block but the last (parallel) -> scan the block totals from the
//            session's carry (sequential, in block order) -> scan every block from its
//            offset (parallel).
//   reduce:  fold every block (parallel) -> combine the totals in block order.
//   compact: count the kept elements of every block (parallel) -> offsets in block order ->
//            write every block's kept elements at its offset (parallel; stable order).
//
// Why not tbb::parallel_scan / parallel_reduce: how they associate the operation depends on
// which ranges got stolen, so float sums and products would change from run to run and with
// the thread count. Here the association depends only on the block layout, which depends only
// on the chunk's length, so the same input and chunking give bit-identical results on any
// number of threads (and a chunk run serially uses the very same blocks).
//
// Elements are read and written with memcpy: buffers come from protobuf strings and need not
// be aligned for T (memcpy of sizeof(T) bytes compiles to a plain load or store).
#include "engine/cpu_engine.h"

#include <oneapi/tbb/blocked_range.h>
#include <oneapi/tbb/enumerable_thread_specific.h>
#include <oneapi/tbb/info.h>
#include <oneapi/tbb/parallel_for.h>
#include <oneapi/tbb/parallel_sort.h>
#include <oneapi/tbb/partitioner.h>
#include <oneapi/tbb/task_arena.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <type_traits>
#include <utility>

#include "engine/dispatch.h"
#include "engine/host_scan.h"
#include "engine/segmented_scan.h"
#include "gpuscan/kernels/canonical_tree.h"
#include "gpuscan/kernels/histogram_bins.h"
#include "gpuscan/kernels/sort_keys.h"

namespace gpuscan::engine {

namespace cpu_detail {

// Asking for more threads than the hardware has gains nothing (TBB would not start the extra
// workers anyway, and says so on stderr), so the request is capped there.
struct Pool {
  explicit Pool(int threads)
      : arena(threads > 0 ? std::min(threads, tbb::info::default_concurrency())
                          : tbb::task_arena::automatic) {
    arena.initialize();
  }
  tbb::task_arena arena;
};

}  // namespace cpu_detail

namespace {

using cpu_detail::Pool;
constexpr uint64_t kBlock = CpuEngine::kBlockElems;

using host::KernelTimer;
using host::Load;
using host::ScanRange;
using host::Store;

// The block layout of one chunk of n elements.
struct Blocks {
  explicit Blocks(uint64_t n_) : n(n_), count((n_ + kBlock - 1) / kBlock) {}
  uint64_t begin(uint64_t b) const { return b * kBlock; }
  uint64_t end(uint64_t b) const { return std::min(n, (b + 1) * kBlock); }
  uint64_t n;
  uint64_t count;
};

// Runs f(b) for b in [0, count): on the pool when `parallel`, else in order on this thread.
// Either way each block's arithmetic is the same, so the results are too.
template <class F>
void ForBlocks(Pool& pool, uint64_t count, bool parallel, const F& f) {
  if (!parallel || count < 2) {
    for (uint64_t b = 0; b < count; ++b) f(b);
    return;
  }
  pool.arena.execute([&] {
    tbb::parallel_for(
        tbb::blocked_range<uint64_t>(0, count, 1),
        [&](const tbb::blocked_range<uint64_t>& r) {
          for (uint64_t b = r.begin(); b != r.end(); ++b) f(b);
        },
        tbb::simple_partitioner());
  });
}

bool RunParallel(const Pool& pool, uint64_t n) {
  return n >= CpuEngine::kParallelMinElems && pool.arena.max_concurrency() > 1;
}

// Whether Op may take its operands in either order (every ops:: operator); a segmented scan's
// pair operator (seg::SegOp) says it may not.
template <class Op, class = void>
struct Commutative : std::true_type {};
template <class Op>
struct Commutative<Op, std::void_t<decltype(Op::kCommutative)>> : std::bool_constant<Op::kCommutative> {};

// Folds elements [begin, end) from the identity. Eight interleaved accumulators break the
// dependency chain (floats add in ~4 cycles); their layout is fixed, so the result is too.
// They regroup the elements, which only a commutative operator allows.
template <class T, class Op>
T Fold(const unsigned char* in, uint64_t begin, uint64_t end) {
  constexpr int kLanes = 8;
  const Op op;
  if constexpr (!Commutative<Op>::value) {
    T total = Op::identity();
    for (uint64_t i = begin; i < end; ++i) total = op(total, Load<T>(in, i));
    return total;
  }
  T acc[kLanes];
  for (T& a : acc) a = Op::identity();
  uint64_t i = begin;
  for (; i + kLanes <= end; i += kLanes) {
    // One copy of the eight elements, then the folds: GCC 12's -O3 loop vectoriser miscompiled
    // eight Load()s at i + l here (integer sums wrong past one 16384-element block; the image's
    // Release build, tests/container). Same association, so the same bits.
    T v[kLanes];
    std::memcpy(v, in + i * sizeof(T), sizeof(v));
    for (int l = 0; l < kLanes; ++l) acc[l] = op(acc[l], v[l]);
  }
  T total = acc[0];
  for (int l = 1; l < kLanes; ++l) total = op(total, acc[l]);
  for (; i < end; ++i) total = op(total, Load<T>(in, i));
  return total;
}

void CheckBuffer(const void* p, uint64_t n, const char* what) {
  if (n != 0 && p == nullptr) {
    throw Error(ErrorCode::kInvalidArgument, std::string("null ") + what + " buffer");
  }
}

// ---------------------------------------------------------------------------------------------
// Scan

template <class T, class Op, bool kExclusive>
class CpuScan final : public ScanSession {
 public:
  explicit CpuScan(std::shared_ptr<Pool> pool) : pool_(std::move(pool)) {}

  void Process(const void* in, void* out, uint64_t n, StageTimes& times) override {
    if (n == 0) return;
    CheckBuffer(in, n, "input");
    CheckBuffer(out, n, "output");
    KernelTimer timer(times);
    const auto* src = static_cast<const unsigned char*>(in);
    auto* dst = static_cast<unsigned char*>(out);
    const Blocks blocks(n);
    if (blocks.count == 1) {
      carry_ = ScanRange<T, Op, kExclusive>(src, dst, 0, n, carry_);
      return;
    }
    const bool parallel = RunParallel(*pool_, n);
    const uint64_t last = blocks.count - 1;
    // offsets[b + 1] first holds block b's total, then the scan turns it into an offset.
    std::vector<T> offsets(blocks.count);
    ForBlocks(*pool_, last, parallel, [&](uint64_t b) {
      offsets[b + 1] = Fold<T, Op>(src, blocks.begin(b), blocks.end(b));
    });
    const Op op;
    offsets[0] = carry_;
    for (uint64_t b = 1; b < blocks.count; ++b) offsets[b] = op(offsets[b - 1], offsets[b]);
    T end_running = carry_;
    ForBlocks(*pool_, blocks.count, parallel, [&](uint64_t b) {
      const T r = ScanRange<T, Op, kExclusive>(src, dst, blocks.begin(b), blocks.end(b), offsets[b]);
      if (b == last) end_running = r;
    });
    // The next chunk continues from the value the last element's scan reached, as if the
    // whole array had been one chunk from here on.
    carry_ = end_running;
  }

  std::string algorithm() const override { return "cpu_blocked"; }
  bool on_host(uint64_t n) const override { return n * sizeof(T) <= kSmallChunkBytes; }
  // Begin runs the whole chunk and End has nothing left to do, so any thread may call it.
  uint64_t overlap_elements() const override { return UINT64_MAX; }

 private:
  std::shared_ptr<Pool> pool_;
  T carry_ = Op::identity();
};

// ---------------------------------------------------------------------------------------------
// Deterministic float SUM / PRODUCT: the canonical tree of gpuscan/kernels/canonical_tree.h,
// whose association is tied to global element positions, so the bits depend on the input
// only (not on the chunking or the thread count) and match the CUDA engine's.

// Runs f(t) for t in [0, count) tiles, several tiles per task; the arithmetic per tile is the
// same whoever runs it.
template <class F>
void ForTiles(Pool& pool, uint64_t count, bool parallel, const F& f) {
  constexpr uint64_t kTilesPerTask = kBlock / canon::kTileItems;  // 4
  const uint64_t tasks = (count + kTilesPerTask - 1) / kTilesPerTask;
  ForBlocks(pool, tasks, parallel, [&](uint64_t b) {
    const uint64_t end = std::min(count, (b + 1) * kTilesPerTask);
    for (uint64_t t = b * kTilesPerTask; t < end; ++t) f(t);
  });
}

template <class T, class Op, bool kExclusive>
class CpuTreeScan final : public ScanSession {
 public:
  explicit CpuTreeScan(std::shared_ptr<Pool> pool) : pool_(std::move(pool)) {}

  void Process(const void* in, void* out, uint64_t n, StageTimes& times) override {
    if (n == 0) return;
    CheckBuffer(in, n, "input");
    CheckBuffer(out, n, "output");
    KernelTimer timer(times);
    canon::ScanChunk<T, Op>(cur_, static_cast<const unsigned char*>(in), static_cast<unsigned char*>(out), n,
                            kExclusive, [&](const unsigned char* src, unsigned char* dst, uint64_t tiles) {
                              ScanWholeTiles(src, dst, tiles);
                            });
  }

  std::string algorithm() const override { return "deterministic"; }
  bool on_host(uint64_t n) const override { return n * sizeof(T) <= kSmallChunkBytes; }
  // Begin runs the whole chunk and End has nothing left to do, so any thread may call it.
  uint64_t overlap_elements() const override { return UINT64_MAX; }

 private:
  // Q and A of every tile (parallel), the tiles' prefixes (sequential, a few values per tile),
  // then every tile from its prefix (parallel).
  void ScanWholeTiles(const unsigned char* src, unsigned char* dst, uint64_t tiles) {
    constexpr uint64_t kTile = canon::kTileItems;
    const bool parallel = RunParallel(*pool_, tiles * kTile);
    std::vector<T> q(tiles * canon::kTileSegs);
    std::vector<T> aggs(tiles);
    ForTiles(*pool_, tiles, parallel, [&](uint64_t t) {
      T* qt = q.data() + t * canon::kTileSegs;
      canon::TileQ<T, Op>(src + t * kTile * sizeof(T), kTile, qt);
      aggs[t] = qt[canon::kTileSegs - 1];
    });
    std::vector<canon::Maybe<T>> prefixes(tiles);
    cur_.state.Commit(aggs.data(), tiles, prefixes.data());
    ForTiles(*pool_, tiles, parallel, [&](uint64_t t) {
      canon::ScanTileQ<T, Op>(src + t * kTile * sizeof(T), dst + t * kTile * sizeof(T), kTile, prefixes[t],
                              kExclusive, q.data() + t * canon::kTileSegs);
    });
  }

  std::shared_ptr<Pool> pool_;
  canon::Cursor<T, Op> cur_;
};

template <class T, class Op>
class CpuTreeReduce final : public ReduceSession {
 public:
  explicit CpuTreeReduce(std::shared_ptr<Pool> pool) : pool_(std::move(pool)) {}

  void Process(const void* in, uint64_t n, StageTimes& times) override {
    if (n == 0) return;
    CheckBuffer(in, n, "input");
    KernelTimer timer(times);
    canon::ReduceChunk<T, Op>(cur_, static_cast<const unsigned char*>(in), n,
                              [&](const unsigned char* src, uint64_t tiles) {
                                constexpr uint64_t kTile = canon::kTileItems;
                                std::vector<T> aggs(tiles);
                                ForTiles(*pool_, tiles, RunParallel(*pool_, tiles * kTile), [&](uint64_t t) {
                                  aggs[t] = canon::TileAggregate<T, Op>(src + t * kTile * sizeof(T));
                                });
                                cur_.state.Commit(aggs.data(), tiles, nullptr);
                              });
  }

  void Result(void* value) const override {
    const T v = canon::ReduceResult(cur_);
    std::memcpy(value, &v, sizeof(T));
  }
  std::string algorithm() const override { return "deterministic"; }

 private:
  std::shared_ptr<Pool> pool_;
  canon::Cursor<T, Op> cur_;
};

// ---------------------------------------------------------------------------------------------
// Reduce

template <class T, class Op>
class CpuReduce final : public ReduceSession {
 public:
  explicit CpuReduce(std::shared_ptr<Pool> pool) : pool_(std::move(pool)) {}

  void Process(const void* in, uint64_t n, StageTimes& times) override {
    if (n == 0) return;
    CheckBuffer(in, n, "input");
    KernelTimer timer(times);
    const auto* src = static_cast<const unsigned char*>(in);
    const Blocks blocks(n);
    const Op op;
    T chunk;
    if (blocks.count == 1) {
      chunk = Fold<T, Op>(src, 0, n);
    } else {
      std::vector<T> totals(blocks.count);
      ForBlocks(*pool_, blocks.count, RunParallel(*pool_, n), [&](uint64_t b) {
        totals[b] = Fold<T, Op>(src, blocks.begin(b), blocks.end(b));
      });
      chunk = totals[0];
      for (uint64_t b = 1; b < blocks.count; ++b) chunk = op(chunk, totals[b]);
    }
    partial_ = op(partial_, chunk);
  }

  void Result(void* value) const override { std::memcpy(value, &partial_, sizeof(T)); }
  std::string algorithm() const override { return "cpu_blocked"; }

 private:
  std::shared_ptr<Pool> pool_;
  T partial_ = Op::identity();
};

// ---------------------------------------------------------------------------------------------
// Compact

// Keep-tests for element i of a chunk: a flag byte, or a predicate on the value.
struct FlagKeep {
  const uint8_t* flags;
  bool operator()(uint64_t i) const { return flags[i] != 0; }
};

// Comparisons are IEEE ones: anything but != with a NaN is false.
template <class T, PredicateOp P>
struct PredicateKeep {
  const unsigned char* values;
  T threshold;
  T upper;
  bool operator()(uint64_t i) const {
    const T x = Load<T>(values, i);
    if constexpr (P == PredicateOp::kNonzero) {
      return x != T(0);
    } else if constexpr (P == PredicateOp::kEq) {
      return x == threshold;
    } else if constexpr (P == PredicateOp::kNe) {
      return x != threshold;
    } else if constexpr (P == PredicateOp::kLt) {
      return x < threshold;
    } else if constexpr (P == PredicateOp::kLe) {
      return x <= threshold;
    } else if constexpr (P == PredicateOp::kGt) {
      return x > threshold;
    } else if constexpr (P == PredicateOp::kGe) {
      return x >= threshold;
    } else if constexpr (P == PredicateOp::kInRange) {
      return threshold <= x && x < upper;
    } else {
      static_assert(P == PredicateOp::kNotNan, "unhandled predicate operator");
      return !ops::IsNan(x);
    }
  }
};

bool IsKnown(PredicateOp p) {
  return static_cast<unsigned>(p) <= static_cast<unsigned>(PredicateOp::kNotNan);
}

// The one place a runtime predicate operator becomes a template argument.
template <class F>
decltype(auto) VisitPredicate(PredicateOp p, F&& f) {
  using P = PredicateOp;
  switch (p) {
    case P::kNonzero: return f(std::integral_constant<P, P::kNonzero>{});
    case P::kEq: return f(std::integral_constant<P, P::kEq>{});
    case P::kNe: return f(std::integral_constant<P, P::kNe>{});
    case P::kLt: return f(std::integral_constant<P, P::kLt>{});
    case P::kLe: return f(std::integral_constant<P, P::kLe>{});
    case P::kGt: return f(std::integral_constant<P, P::kGt>{});
    case P::kGe: return f(std::integral_constant<P, P::kGe>{});
    case P::kInRange: return f(std::integral_constant<P, P::kInRange>{});
    case P::kNotNan: return f(std::integral_constant<P, P::kNotNan>{});
  }
  throw Error(ErrorCode::kInvalidArgument, "unknown predicate operator");
}

template <class T>
class CpuCompact final : public CompactSession {
 public:
  CpuCompact(std::shared_ptr<Pool> pool, const CompactSpec& spec)
      : pool_(std::move(pool)), spec_(spec) {
    std::memcpy(&threshold_, spec.predicate.threshold, sizeof(T));
    std::memcpy(&upper_, spec.predicate.upper, sizeof(T));
  }

  uint64_t Process(const void* values, const uint8_t* flags, uint64_t n, void* out_values,
                   int64_t* out_indices, StageTimes& times) override {
    if (n == 0) return 0;
    if (spec_.use_flags) CheckBuffer(flags, n, "flags");
    if (!spec_.use_flags || spec_.want_values) CheckBuffer(values, n, "values");
    if (spec_.want_values) CheckBuffer(out_values, n, "output values");
    if (spec_.want_indices) CheckBuffer(out_indices, n, "output indices");
    KernelTimer timer(times);
    Out out{static_cast<const unsigned char*>(values),
            spec_.want_values ? static_cast<unsigned char*>(out_values) : nullptr,
            spec_.want_indices ? reinterpret_cast<unsigned char*>(out_indices) : nullptr,
            offset_};
    uint64_t kept;
    if (spec_.use_flags) {
      kept = Run(FlagKeep{flags}, out, n);
    } else {
      kept = VisitPredicate(spec_.predicate.op, [&](auto p) {
        return Run(PredicateKeep<T, decltype(p)::value>{out.values, threshold_, upper_}, out, n);
      });
    }
    offset_ += n;
    return kept;
  }

  std::string algorithm() const override { return "cpu_blocked"; }

 private:
  struct Out {
    const unsigned char* values;
    unsigned char* out_values;   // null: values not wanted
    unsigned char* out_indices;  // null: indices not wanted (int64, maybe unaligned)
    uint64_t offset;             // the chunk's first element's index in the whole array
  };

  template <class Keep>
  static uint64_t Count(const Keep& keep, uint64_t begin, uint64_t end) {
    uint64_t count = 0;
    for (uint64_t i = begin; i < end; ++i) count += keep(i) ? 1 : 0;
    return count;
  }

  // Writes the kept elements of [begin, end) from output position `pos` on; returns the
  // position after the last one written.
  template <class Keep>
  static uint64_t Write(const Keep& keep, const Out& out, uint64_t begin, uint64_t end,
                        uint64_t pos) {
    for (uint64_t i = begin; i < end; ++i) {
      if (!keep(i)) continue;
      if (out.out_values) Store(out.out_values, pos, Load<T>(out.values, i));
      if (out.out_indices) Store(out.out_indices, pos, static_cast<int64_t>(out.offset + i));
      ++pos;
    }
    return pos;
  }

  template <class Keep>
  uint64_t Run(const Keep& keep, const Out& out, uint64_t n) {
    const Blocks blocks(n);
    if (blocks.count == 1) return Write(keep, out, 0, n, 0);
    const bool parallel = RunParallel(*pool_, n);
    // starts[b + 1] first holds block b's count, then the scan turns it into b + 1's start.
    std::vector<uint64_t> starts(blocks.count + 1, 0);
    ForBlocks(*pool_, blocks.count, parallel, [&](uint64_t b) {
      starts[b + 1] = Count(keep, blocks.begin(b), blocks.end(b));
    });
    for (uint64_t b = 1; b <= blocks.count; ++b) starts[b] += starts[b - 1];
    ForBlocks(*pool_, blocks.count, parallel, [&](uint64_t b) {
      Write(keep, out, blocks.begin(b), blocks.end(b), starts[b]);
    });
    return starts[blocks.count];
  }

  std::shared_ptr<Pool> pool_;
  CompactSpec spec_;
  T threshold_{};
  T upper_{};
  uint64_t offset_ = 0;
};

std::string CpuModelName() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("model name", 0) != 0) continue;
    const auto colon = line.find(':');
    if (colon == std::string::npos) break;
    const auto first = line.find_first_not_of(" \t", colon + 1);
    return first == std::string::npos ? std::string() : line.substr(first);
  }
  return {};
}

// ---------------------------------------------------------------------------------------------
// Histogram: each thread counts its blocks into counters of its own, added up after the chunk
// (integer counts: the sum is the same in any order).

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

CpuEngine::CpuEngine(int threads) {
  if (threads < 0) {
    throw Error(ErrorCode::kInvalidArgument,
                "cpu threads must be >= 0 (0 = all hardware threads), got " +
                    std::to_string(threads));
  }
  pool_ = std::make_shared<cpu_detail::Pool>(threads);
  const int n = this->threads();
  device_name_ = "cpu (" + std::to_string(n) + (n == 1 ? " thread" : " threads");
  const std::string model = CpuModelName();
  if (!model.empty()) device_name_ += ", " + model;
  device_name_ += ")";
}

CpuEngine::~CpuEngine() = default;

int CpuEngine::threads() const { return pool_->arena.max_concurrency(); }

std::vector<ScanAlgorithm> CpuEngine::scan_algorithms() const {
  return {ScanAlgorithm::kDefault, ScanAlgorithm::kCpuBlocked, ScanAlgorithm::kDeterministic};
}
std::vector<std::string> CpuEngine::reduce_algorithms() const { return {"cpu_blocked", "deterministic"}; }
std::vector<std::string> CpuEngine::compact_algorithms() const { return {"cpu_blocked"}; }

std::unique_ptr<ScanSession> CpuEngine::NewScan(const ScanSpec& spec) {
  if (spec.algorithm != ScanAlgorithm::kDefault && spec.algorithm != ScanAlgorithm::kCpuBlocked &&
      spec.algorithm != ScanAlgorithm::kDeterministic) {
    if (static_cast<unsigned>(spec.algorithm) > static_cast<unsigned>(ScanAlgorithm::kDeterministic)) {
      throw Error(ErrorCode::kInvalidArgument, "unknown scan algorithm");
    }
    throw Error(ErrorCode::kUnimplemented,
                "scan algorithm '" + std::string(Name(spec.algorithm)) +
                    "' is not available on the cpu engine (available: cpu_blocked, deterministic)");
  }
  return Visit(spec.dtype, spec.op, [&](auto t, auto o) -> std::unique_ptr<ScanSession> {
    using T = typename decltype(t)::type;
    using O = typename decltype(o)::type;
    // Float SUM/PRODUCT take the canonical tree unless cpu_blocked is asked for by name; every
    // other pair is exact in any association and keeps the blocked path.
    if constexpr (canon::kUsesTree<T, O>) {
      if (spec.algorithm != ScanAlgorithm::kCpuBlocked) {
        if (spec.exclusive) return std::make_unique<CpuTreeScan<T, O, true>>(pool_);
        return std::make_unique<CpuTreeScan<T, O, false>>(pool_);
      }
    }
    if (spec.exclusive) return std::make_unique<CpuScan<T, O, true>>(pool_);
    return std::make_unique<CpuScan<T, O, false>>(pool_);
  });
}

std::unique_ptr<ReduceSession> CpuEngine::NewReduce(const ReduceSpec& spec) {
  return Visit(spec.dtype, spec.op, [&](auto t, auto o) -> std::unique_ptr<ReduceSession> {
    using T = typename decltype(t)::type;
    using O = typename decltype(o)::type;
    if constexpr (canon::kUsesTree<T, O>) return std::make_unique<CpuTreeReduce<T, O>>(pool_);
    return std::make_unique<CpuReduce<T, O>>(pool_);
  });
}

std::unique_ptr<HistogramSession> CpuEngine::NewHistogram(const HistogramSpec& spec) {
  CheckHistogramSpec(spec);
  return VisitDType(spec.dtype, [&](auto t) -> std::unique_ptr<HistogramSession> {
    return std::make_unique<CpuHistogram<typename decltype(t)::type>>(pool_, spec);
  });
}

// Over (head, value) pairs: the canonical tree for float SUM/PRODUCT (reproducible), the
// blocked scan for the rest (exact in any association).
std::unique_ptr<SegmentedScanSession> CpuEngine::NewSegmentedScan(const SegmentedScanSpec& spec) {
  return Visit(spec.dtype, spec.op, [&](auto t, auto o) -> std::unique_ptr<SegmentedScanSession> {
    using T = typename decltype(t)::type;
    using O = typename decltype(o)::type;
    using Item = seg::SegItem<T>;
    using Pairs = seg::SegOp<T, O>;
    std::unique_ptr<ScanSession> pairs;
    if constexpr (canon::kUsesTree<T, O>) {
      pairs = std::make_unique<CpuTreeScan<Item, Pairs, false>>(pool_);
    } else {
      pairs = std::make_unique<CpuScan<Item, Pairs, false>>(pool_);
    }
    return std::make_unique<PairSegmentedScan<T, O>>(spec, std::move(pairs));
  });
}

namespace {

// 2-D scan: the rows in parallel (each folded left to right), then strips of columns in
// parallel (each column folded top to bottom from the carry row). Every element's association is
// the spec's, whatever the threads or the number of rows per call.
template <class T, class Op>
class CpuScan2D final : public Scan2DSession {
 public:
  CpuScan2D(std::shared_ptr<Pool> pool, uint64_t cols) : pool_(std::move(pool)), cols_(cols), carry_(cols) {}

  void Process(const void* in, void* out, uint64_t rows, StageTimes& times) override {
    if (rows == 0) return;
    const uint64_t n = rows * cols_;
    CheckBuffer(in, n, "input");
    CheckBuffer(out, n, "output");
    KernelTimer timer(times);
    const auto* src = static_cast<const unsigned char*>(in);
    auto* dst = static_cast<unsigned char*>(out);
    const Op op;
    const bool parallel = RunParallel(*pool_, n);
    ForBlocks(*pool_, rows, parallel, [&](uint64_t i) {
      const uint64_t base = i * cols_;
      T acc = Load<T>(src, base);
      Store(dst, base, acc);
      for (uint64_t j = 1; j < cols_; ++j) Store(dst, base + j, acc = op(acc, Load<T>(src, base + j)));
    });
    const uint64_t strips = (cols_ + kBlock - 1) / kBlock;
    ForBlocks(*pool_, strips, parallel, [&](uint64_t s) {
      const uint64_t j0 = s * kBlock, j1 = std::min(cols_, j0 + kBlock);
      uint64_t i = 0;
      if (!has_carry_) i = 1;  // the table's first row is its row fold
      for (; i < rows; ++i) {
        for (uint64_t j = j0; j < j1; ++j) {
          const T above = i == 0 ? carry_[j] : Load<T>(dst, (i - 1) * cols_ + j);
          Store(dst, i * cols_ + j, op(above, Load<T>(dst, i * cols_ + j)));
        }
      }
    });
    std::memcpy(carry_.data(), dst + (rows - 1) * cols_ * sizeof(T), cols_ * sizeof(T));
    has_carry_ = true;
  }
  std::string algorithm() const override { return "cpu_rows_columns"; }

 private:
  std::shared_ptr<Pool> pool_;
  uint64_t cols_;
  std::vector<T> carry_;  // the last row of the table so far
  bool has_carry_ = false;
};

// Axis scans: each row (axis=1) or each column (axis=0) folded in order, numpy's association:
// rows in parallel, each whole in a call; strips of columns in parallel, each column continuing
// its carry (its inclusive value in the last row so far) from the call before.
template <class T, class Op>
class CpuScanAxis final : public Scan2DSession {
 public:
  CpuScanAxis(std::shared_ptr<Pool> pool, const Scan2DSpec& spec)
      : pool_(std::move(pool)), cols_(spec.cols), rows_axis_(spec.axis == ScanAxis::kRows),
        exclusive_(spec.exclusive), carry_(rows_axis_ ? 0 : spec.cols) {}

  void Process(const void* in, void* out, uint64_t rows, StageTimes& times) override {
    if (rows == 0) return;
    const uint64_t n = rows * cols_;
    CheckBuffer(in, n, "input");
    CheckBuffer(out, n, "output");
    KernelTimer timer(times);
    const auto* src = static_cast<const unsigned char*>(in);
    auto* dst = static_cast<unsigned char*>(out);
    const bool parallel = RunParallel(*pool_, n);
    if (rows_axis_) {
      ForBlocks(*pool_, rows, parallel, [&](uint64_t i) {
        T acc{};
        for (uint64_t j = 0, at = i * cols_; j < cols_; ++j, ++at) Step(j > 0, acc, Load<T>(src, at), dst, at);
      });
      return;
    }
    const uint64_t strips = (cols_ + kBlock - 1) / kBlock;
    ForBlocks(*pool_, strips, parallel, [&](uint64_t s) {
      const uint64_t j0 = s * kBlock, j1 = std::min(cols_, j0 + kBlock);
      for (uint64_t i = 0; i < rows; ++i) {
        const bool started = has_carry_ || i > 0;
        for (uint64_t j = j0; j < j1; ++j) Step(started, carry_[j], Load<T>(src, i * cols_ + j), dst, i * cols_ + j);
      }
    });
    has_carry_ = true;
  }
  std::string algorithm() const override { return rows_axis_ ? "cpu_rows" : "cpu_columns"; }

 private:
  // One element of a fold: acc becomes acc op v (v alone where the fold starts), and the output
  // is acc after (inclusive) or before (exclusive: the identity where the fold starts).
  void Step(bool started, T& acc, T v, unsigned char* dst, uint64_t at) const {
    const Op op;
    if (!started) {
      Store(dst, at, exclusive_ ? Op::identity() : v);
      acc = v;
      return;
    }
    if (exclusive_) Store(dst, at, acc);
    acc = op(acc, v);
    if (!exclusive_) Store(dst, at, acc);
  }

  std::shared_ptr<Pool> pool_;
  uint64_t cols_;
  bool rows_axis_, exclusive_;
  std::vector<T> carry_;  // columns: each one's inclusive value in the last row so far
  bool has_carry_ = false;
};

}  // namespace

std::unique_ptr<Scan2DSession> CpuEngine::NewScan2D(const Scan2DSpec& spec) {
  if (spec.cols == 0) throw Error(ErrorCode::kInvalidArgument, "a 2-D scan needs at least one column");
  return Visit(spec.dtype, spec.op, [&](auto t, auto o) -> std::unique_ptr<Scan2DSession> {
    using T = typename decltype(t)::type;
    using O = typename decltype(o)::type;
    if (spec.axis != ScanAxis::kBoth) return std::make_unique<CpuScanAxis<T, O>>(pool_, spec);
    return std::make_unique<CpuScan2D<T, O>>(pool_, spec.cols);
  });
}

// (code, position) pairs sorted as pairs: the position breaks ties, so the parallel sort is
// stable and its result does not depend on the thread count.
namespace {

std::string SortOnPool(cpu_detail::Pool& pool, const SortSpec& spec, const void* keys, const void* values, uint64_t n,
                       void* keys_out, void* values_out, int64_t* indices_out, StageTimes& times) {
  KernelTimer timer(times);
  if (n == 0) return "parallel_sort";
  CheckBuffer(keys, n, "keys");
  if (spec.has_values) CheckBuffer(values, n, "values");
  VisitDType(spec.dtype, [&](auto t) {
    using T = typename decltype(t)::type;
    using U = sortkey::Code<T>;
    const auto* in = static_cast<const unsigned char*>(keys);
    std::vector<std::pair<U, uint64_t>> v(n);
    const bool parallel = RunParallel(pool, n);
    const Blocks blocks(n);
    ForBlocks(pool, blocks.count, parallel, [&](uint64_t b) {
      for (uint64_t i = blocks.begin(b); i < blocks.end(b); ++i) v[i] = {sortkey::Encode(Load<T>(in, i), spec.descending), i};
    });
    pool.arena.execute([&] { tbb::parallel_sort(v.begin(), v.end()); });
    const size_t vsize = spec.has_values ? SizeOf(spec.values_dtype) : 0;
    const auto* vin = static_cast<const unsigned char*>(values);
    auto* kout = static_cast<unsigned char*>(keys_out);
    auto* vout = static_cast<unsigned char*>(values_out);
    ForBlocks(pool, blocks.count, parallel, [&](uint64_t b) {
      for (uint64_t i = blocks.begin(b); i < blocks.end(b); ++i) {
        if (kout) Store(kout, i, sortkey::Decode<T>(v[i].first, spec.descending));
        if (vout) std::memcpy(vout + i * vsize, vin + v[i].second * vsize, vsize);
        if (indices_out) indices_out[i] = static_cast<int64_t>(v[i].second);
      }
    });
  });
  return "parallel_sort";
}

}  // namespace

std::unique_ptr<SortSession> CpuEngine::NewSort(const SortSpec& spec) {
  return std::make_unique<SortSession>([pool = pool_, spec](const void* keys, const void* values, uint64_t n,
                                                           void* keys_out, void* values_out, int64_t* indices_out,
                                                           StageTimes& times) {
    return SortOnPool(*pool, spec, keys, values, n, keys_out, values_out, indices_out, times);
  });
}

std::unique_ptr<SegmentedScanSession> NewHostSegmentedScan(const SegmentedScanSpec& spec) {
  static CpuEngine host(0);  // sessions share its pool, and keep it alive
  return host.NewSegmentedScan(spec);
}

std::unique_ptr<CompactSession> CpuEngine::NewCompact(const CompactSpec& spec) {
  if (!spec.use_flags && !IsKnown(spec.predicate.op)) {
    throw Error(ErrorCode::kInvalidArgument, "unknown predicate operator");
  }
  return VisitDType(spec.dtype, [&](auto t) -> std::unique_ptr<CompactSession> {
    using T = typename decltype(t)::type;
    return std::make_unique<CpuCompact<T>>(pool_, spec);
  });
}

}  // namespace gpuscan::engine
