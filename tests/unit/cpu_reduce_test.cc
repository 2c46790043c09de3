// CPU engine reductions against the sequential reference, plus determinism: float results are
// bit-identical run to run and for any thread count, given the same chunking.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "engine_runner.h"

namespace gpuscan::unit {
namespace {

struct ReduceCase {
  DType dtype;
  Op op;
};

std::vector<ReduceCase> AllReduceCases() {
  std::vector<ReduceCase> cases;
  for (DType d : engine::kAllDTypes) {
    for (Op op : engine::kAllOps) {
      if (!(engine::IsFloat(d) && engine::IsBitwise(op))) cases.push_back({d, op});
    }
  }
  return cases;
}

std::string ReduceCaseName(const ::testing::TestParamInfo<ReduceCase>& info) {
  return std::string(engine::Name(info.param.dtype)) + "_" +
         std::string(engine::Name(info.param.op));
}

class CpuReduceTest : public ::testing::TestWithParam<ReduceCase> {};

TEST_P(CpuReduceTest, MatchesReferenceOneChunkAndRandomChunks) {
  const ReduceCase c = GetParam();
  CpuEngine engine(0);
  GPUSCAN_SEEDED_RNG(rng);
  ReduceSpec spec;
  spec.dtype = c.dtype;
  spec.op = c.op;
  engine::Visit(c.dtype, c.op, [&](auto t, auto o) {
    using T = typename decltype(t)::type;
    using O = typename decltype(o)::type;
    for (std::size_t n : SweepSizes<T>()) {
      SCOPED_TRACE(::testing::Message() << "n = " << n);
      const std::vector<T> in = testing::RandomInput<T, O>(n, rng);
      const T ref = testing::ReduceRef<T, O>(in);
      testing::ExpectReduceNear<T, O>(RunReduce(engine, spec, in, OneChunk(in)), ref, in,
                                      "one chunk");
      const auto chunks = testing::RandomChunkLengths(n, rng, RandomTypicalChunk<T>(n, rng));
      SCOPED_TRACE(Describe(chunks));
      testing::ExpectReduceNear<T, O>(RunReduce(engine, spec, in, chunks), ref, in,
                                      "random chunks");
    }
  });
}

TEST_P(CpuReduceTest, EmptyIsTheIdentity) {
  const ReduceCase c = GetParam();
  CpuEngine engine(1);
  ReduceSpec spec;
  spec.dtype = c.dtype;
  spec.op = c.op;
  engine::Visit(c.dtype, c.op, [&](auto t, auto o) {
    using T = typename decltype(t)::type;
    using O = typename decltype(o)::type;
    const std::vector<T> none;
    EXPECT_TRUE(testing::SameValue(RunReduce(engine, spec, none, {}), O::identity()));
    EXPECT_TRUE(testing::SameValue(RunReduce(engine, spec, none, {0, 0}), O::identity()));
  });
}

INSTANTIATE_TEST_SUITE_P(AllDTypesAndOps, CpuReduceTest, ::testing::ValuesIn(AllReduceCases()),
                         ReduceCaseName);

TEST(CpuReduceEdge, WrapNanInfinityAndSignedZeros) {
  CpuEngine engine(2);
  auto reduce = [&](DType d, Op op, auto in) {
    ReduceSpec spec;
    spec.dtype = d;
    spec.op = op;
    return RunReduce(engine, spec, in, std::vector<std::size_t>(in.size(), 1));
  };
  constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
  constexpr float kInf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(reduce(DType::kInt32, Op::kSum, std::vector<int32_t>{std::numeric_limits<int32_t>::max(), 2}),
            std::numeric_limits<int32_t>::min() + 1);
  EXPECT_EQ(reduce(DType::kUInt64, Op::kProduct, std::vector<uint64_t>{uint64_t{1} << 63, 2}), 0u);
  EXPECT_TRUE(std::isnan(reduce(DType::kFloat64, Op::kSum, std::vector<double>{1, kNaN, 2})));
  EXPECT_TRUE(std::isnan(reduce(DType::kFloat64, Op::kMin, std::vector<double>{1, kNaN, -5})));
  EXPECT_TRUE(std::isnan(reduce(DType::kFloat64, Op::kMax, std::vector<double>{1, kNaN, 5})));
  EXPECT_EQ(reduce(DType::kFloat32, Op::kMax, std::vector<float>{1, kInf, 5}), kInf);
  EXPECT_TRUE(std::isnan(reduce(DType::kFloat32, Op::kSum, std::vector<float>{kInf, 1, -kInf})));
  EXPECT_TRUE(std::signbit(reduce(DType::kFloat32, Op::kMin, std::vector<float>{0.f, -0.f, 0.f})));
  EXPECT_FALSE(std::signbit(reduce(DType::kFloat32, Op::kMax, std::vector<float>{-0.f, 0.f, -0.f})));
}

// The same input and chunking must give the same bits whatever the thread count.
template <class T, class O>
void CheckDeterminism(DType dtype, Op op, std::mt19937_64& rng) {
  SCOPED_TRACE(std::string(engine::Name(dtype)) + " " + std::string(engine::Name(op)));
  const std::size_t n = 1000003;
  const std::vector<T> in = testing::RandomInput<T, O>(n, rng);
  const auto chunks = testing::RandomChunkLengths(n, rng, 300000);
  SCOPED_TRACE(Describe(chunks));
  ReduceSpec rspec;
  rspec.dtype = dtype;
  rspec.op = op;
  ScanSpec sspec;
  sspec.dtype = dtype;
  sspec.op = op;
  CpuEngine one(1);
  const T reduce_ref = RunReduce(one, rspec, in, chunks);
  const std::vector<T> scan_ref = RunScan(one, sspec, in, chunks);
  for (int threads : {1, 4, 1}) {
    CpuEngine engine(threads);
    SCOPED_TRACE(::testing::Message() << threads << " threads");
    for (int run = 0; run < 2; ++run) {
      const T got = RunReduce(engine, rspec, in, chunks);
      EXPECT_TRUE(testing::SameBits(got, reduce_ref))
          << testing::Show(got) << " vs " << testing::Show(reduce_ref);
      testing::ExpectSameBits(RunScan(engine, sspec, in, chunks), scan_ref, "scan");
    }
  }
}

TEST(CpuDeterminism, FloatResultsAreBitIdenticalForAnyThreadCount) {
  GPUSCAN_SEEDED_RNG(rng);
  CheckDeterminism<float, ops::Sum<float>>(DType::kFloat32, Op::kSum, rng);
  CheckDeterminism<float, ops::Product<float>>(DType::kFloat32, Op::kProduct, rng);
  CheckDeterminism<double, ops::Sum<double>>(DType::kFloat64, Op::kSum, rng);
  CheckDeterminism<double, ops::Product<double>>(DType::kFloat64, Op::kProduct, rng);
}

}  // namespace
}  // namespace gpuscan::unit
