// CPU engine stream compaction against the sequential reference: flags and every predicate,
// values / indices / both, one chunk and random chunks (indices continue across chunks).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "engine_runner.h"

namespace gpuscan::unit {
namespace {

constexpr PredicateOp kAllPredicates[] = {
    PredicateOp::kNonzero, PredicateOp::kEq, PredicateOp::kNe,      PredicateOp::kLt,
    PredicateOp::kLe,      PredicateOp::kGt, PredicateOp::kGe,      PredicateOp::kInRange,
    PredicateOp::kNotNan};

struct Want {
  bool values;
  bool indices;
  const char* name;
};
constexpr Want kWants[] = {{true, false, "values"}, {false, true, "indices"}, {true, true, "both"}};

template <class T>
CompactSpec PredicateSpec(DType dtype, PredicateOp op, T threshold, T upper, const Want& want) {
  CompactSpec spec;
  spec.dtype = dtype;
  spec.use_flags = false;
  spec.predicate.op = op;
  std::memcpy(spec.predicate.threshold, &threshold, sizeof(T));
  std::memcpy(spec.predicate.upper, &upper, sizeof(T));
  spec.want_values = want.values;
  spec.want_indices = want.indices;
  return spec;
}

template <class T>
void ExpectCompact(const testing::CompactResult<T>& got, const testing::CompactResult<T>& ref,
                   const Want& want, const std::string& what) {
  if (want.values) testing::ExpectEqualValues(got.values, ref.values, what + " values");
  if (want.indices) testing::ExpectEqualValues(got.indices, ref.indices, what + " indices");
}

class CpuCompactTest : public ::testing::TestWithParam<DType> {};

TEST_P(CpuCompactTest, PredicatesMatchReference) {
  const DType dtype = GetParam();
  CpuEngine engine(0);
  GPUSCAN_SEEDED_RNG(rng);
  engine::VisitDType(dtype, [&](auto t) {
    using T = typename decltype(t)::type;
    for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{1000},
                          CpuEngine::kBlockElems + 1, 2 * CpuEngine::kParallelMinElems + 5}) {
      SCOPED_TRACE(::testing::Message() << "n = " << n);
      const auto in = testing::RandomCompactInput<T>(n, rng, 0.05);
      for (PredicateOp op : kAllPredicates) {
        SCOPED_TRACE(engine::Name(op));
        // Thresholds from the data (so EQ finds matches), NaN-free.
        auto pick = [&]() -> T {
          for (int tries = 0; tries < 8 && n > 0; ++tries) {
            const T x = in[rng() % n];
            if (!ops::IsNan(x)) return x;
          }
          return T(3);
        };
        T threshold = pick(), upper = pick();
        if (upper < threshold) std::swap(threshold, upper);
        const auto ref = testing::CompactRef(in, op, threshold, upper);
        for (const Want& want : kWants) {
          SCOPED_TRACE(want.name);
          const CompactSpec spec = PredicateSpec(dtype, op, threshold, upper, want);
          ExpectCompact(RunCompact(engine, spec, in, nullptr, OneChunk(in)), ref, want,
                        "one chunk");
          const auto chunks = testing::RandomChunkLengths(n, rng, RandomTypicalChunk<T>(n, rng));
          SCOPED_TRACE(Describe(chunks));
          ExpectCompact(RunCompact(engine, spec, in, nullptr, chunks), ref, want,
                        "random chunks");
        }
      }
    }
  });
}

TEST_P(CpuCompactTest, FlagsMatchReference) {
  const DType dtype = GetParam();
  CpuEngine engine(0);
  GPUSCAN_SEEDED_RNG(rng);
  engine::VisitDType(dtype, [&](auto t) {
    using T = typename decltype(t)::type;
    for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{33},
                          CpuEngine::kBlockElems - 1, 3 * CpuEngine::kParallelMinElems + 1}) {
      for (double p_keep : {0.0, 0.01, 0.5, 1.0}) {
        SCOPED_TRACE(::testing::Message() << "n = " << n << ", p_keep " << p_keep);
        const auto in = testing::RandomCompactInput<T>(n, rng, 0.05);
        const auto flags = testing::RandomFlags(n, rng, p_keep);
        const auto ref = testing::CompactRef(in, flags);
        for (const Want& want : kWants) {
          SCOPED_TRACE(want.name);
          CompactSpec spec;
          spec.dtype = dtype;
          spec.use_flags = true;
          spec.want_values = want.values;
          spec.want_indices = want.indices;
          ExpectCompact(RunCompact(engine, spec, in, &flags, OneChunk(in)), ref, want,
                        "one chunk");
          const auto chunks = testing::RandomChunkLengths(n, rng, RandomTypicalChunk<T>(n, rng));
          SCOPED_TRACE(Describe(chunks));
          ExpectCompact(RunCompact(engine, spec, in, &flags, chunks), ref, want, "random chunks");
        }
      }
    }
  });
}

INSTANTIATE_TEST_SUITE_P(AllDTypes, CpuCompactTest, ::testing::ValuesIn(engine::kAllDTypes),
                         [](const ::testing::TestParamInfo<DType>& info) {
                           return std::string(engine::Name(info.param));
                         });

TEST(CpuCompactEdge, NanComparisons) {
  CpuEngine engine(2);
  constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
  constexpr double kInf = std::numeric_limits<double>::infinity();
  const std::vector<double> in = {1.0, kNaN, -0.0, 0.0, kInf, -kInf, kNaN, 2.0};
  const Want both{true, true, "both"};
  auto indices = [&](PredicateOp op, double threshold, double upper = 0) {
    return RunCompact(engine, PredicateSpec(DType::kFloat64, op, threshold, upper, both), in,
                      nullptr, std::vector<std::size_t>{3, 0, 5})
        .indices;
  };
  using V = std::vector<int64_t>;
  EXPECT_EQ(indices(PredicateOp::kNotNan, 0), (V{0, 2, 3, 4, 5, 7}));
  EXPECT_EQ(indices(PredicateOp::kNonzero, 0), (V{0, 1, 4, 5, 6, 7}));  // NaN != 0; -0 == 0
  EXPECT_EQ(indices(PredicateOp::kEq, kNaN), V{});
  EXPECT_EQ(indices(PredicateOp::kNe, kNaN), (V{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(indices(PredicateOp::kNe, 1.0), (V{1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(indices(PredicateOp::kEq, 0.0), (V{2, 3}));
  EXPECT_EQ(indices(PredicateOp::kLt, 1.0), (V{2, 3, 5}));
  EXPECT_EQ(indices(PredicateOp::kGe, 1.0), (V{0, 4, 7}));
  EXPECT_EQ(indices(PredicateOp::kGt, kNaN), V{});
  EXPECT_EQ(indices(PredicateOp::kInRange, -kInf, kInf), (V{0, 2, 3, 5, 7}));
  EXPECT_EQ(indices(PredicateOp::kInRange, 0.0, 2.0), (V{0, 2, 3}));
}

TEST(CpuCompactEdge, IntegerPredicatesAtTheLimits) {
  CpuEngine engine(2);
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  const std::vector<int64_t> in = {kMin, -1, 0, 1, kMax};
  const Want values{true, false, "values"};
  auto run = [&](PredicateOp op, int64_t threshold, int64_t upper = 0) {
    return RunCompact(engine, PredicateSpec(DType::kInt64, op, threshold, upper, values), in,
                      nullptr, OneChunk(in))
        .values;
  };
  using V = std::vector<int64_t>;
  EXPECT_EQ(run(PredicateOp::kNotNan, 0), in);
  EXPECT_EQ(run(PredicateOp::kLe, kMin), (V{kMin}));
  EXPECT_EQ(run(PredicateOp::kGt, -1), (V{0, 1, kMax}));
  EXPECT_EQ(run(PredicateOp::kInRange, kMin, kMax), (V{kMin, -1, 0, 1}));
  EXPECT_EQ(run(PredicateOp::kNonzero, 0), (V{kMin, -1, 1, kMax}));
  const std::vector<uint32_t> u = {0, 1, 0xFFFFFFFFu};
  CompactSpec spec = PredicateSpec<uint32_t>(DType::kUInt32, PredicateOp::kGe, 1u, 0u, values);
  EXPECT_EQ(RunCompact(engine, spec, u, nullptr, OneChunk(u)).values,
            (std::vector<uint32_t>{1, 0xFFFFFFFFu}));
}

TEST(CpuCompactEdge, IndicesContinueAcrossChunksAndValuesMayBeAbsentWithFlags) {
  CpuEngine engine(2);
  CompactSpec spec;
  spec.dtype = DType::kFloat32;
  spec.use_flags = true;
  spec.want_values = false;
  spec.want_indices = true;
  auto session = engine.NewCompact(spec);
  StageTimes times;
  const uint8_t flags1[] = {1, 0, 1};
  const uint8_t flags2[] = {0, 0, 9, 1};
  int64_t out[4];
  EXPECT_EQ(session->Process(nullptr, flags1, 3, nullptr, out, times), 2u);
  EXPECT_EQ(out[0], 0);
  EXPECT_EQ(out[1], 2);
  EXPECT_EQ(session->Process(nullptr, flags2, 0, nullptr, out, times), 0u);
  EXPECT_EQ(session->Process(nullptr, flags2, 4, nullptr, out, times), 2u);
  EXPECT_EQ(out[0], 5);
  EXPECT_EQ(out[1], 6);
  EXPECT_EQ(session->algorithm(), "cpu_blocked");
}

TEST(CpuCompactEdge, StableOrderAcrossBlocks) {
  // Every third element of a multi-block chunk, kept in order, with its index.
  CpuEngine engine(4);
  const std::size_t n = 5 * CpuEngine::kParallelMinElems + 17;
  std::vector<uint32_t> in(n);
  std::vector<uint8_t> flags(n);
  for (std::size_t i = 0; i < n; ++i) {
    in[i] = static_cast<uint32_t>(i);
    flags[i] = i % 3 == 0;
  }
  CompactSpec spec;
  spec.dtype = DType::kUInt32;
  spec.use_flags = true;
  spec.want_values = true;
  spec.want_indices = true;
  const auto got = RunCompact(engine, spec, in, &flags, OneChunk(in));
  ASSERT_EQ(got.values.size(), (n + 2) / 3);
  for (std::size_t k = 0; k < got.values.size(); ++k) {
    if (got.values[k] != 3 * k || got.indices[k] != static_cast<int64_t>(3 * k)) {
      ADD_FAILURE() << "out of order at " << k << ": " << got.values[k] << " / " << got.indices[k];
      break;
    }
  }
}

}  // namespace
}  // namespace gpuscan::unit
