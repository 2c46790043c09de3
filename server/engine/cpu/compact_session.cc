// Stream compaction on the pool: count the kept elements of every block (parallel) -> offsets
// in block order -> write every block's kept elements at its offset (parallel; stable order).
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

#include "engine/cpu/blocks.h"
#include "engine/cpu/sessions.h"
#include "engine/dispatch.h"

namespace gpuscan::engine::cpu {
namespace {

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
  // The cpu engine's "device" memory is host memory (a resident array): in pieces, as a scan's;
  // each piece's kept elements follow the last piece's.
  uint64_t ProcessDevice(const void* values, const uint8_t* flags, uint64_t n, void* out_values,
                         int64_t* out_indices, StageTimes& times) override {
    const uint64_t piece = kResidentPieceBytes / sizeof(T);
    uint64_t kept = 0;
    for (uint64_t at = 0; at < n; at += piece) {
      kept += Process(values ? static_cast<const T*>(values) + at : nullptr, flags ? flags + at : nullptr,
                      std::min(piece, n - at), out_values ? static_cast<T*>(out_values) + kept : nullptr,
                      out_indices ? out_indices + kept : nullptr, times);
    }
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

}  // namespace

std::unique_ptr<CompactSession> NewCompact(const std::shared_ptr<Pool>& pool, const CompactSpec& spec) {
  if (!spec.use_flags && !IsKnown(spec.predicate.op)) {
    throw Error(ErrorCode::kInvalidArgument, "unknown predicate operator");
  }
  return VisitDType(spec.dtype, [&](auto t) -> std::unique_ptr<CompactSession> {
    using T = typename decltype(t)::type;
    return std::make_unique<CpuCompact<T>>(pool, spec);
  });
}

}  // namespace gpuscan::engine::cpu
