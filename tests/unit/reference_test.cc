// The references checked by hand: everything else is checked against them.
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "engine/types.h"
#include "reference.h"

namespace gpuscan::testing {
namespace {

using engine::PredicateOp;

TEST(Reference, InclusiveAndExclusiveSum) {
  const std::vector<int32_t> in = {1, 2, 3};
  EXPECT_EQ((ScanRef<int32_t, ops::Sum<int32_t>>(in, false)), (std::vector<int32_t>{1, 3, 6}));
  EXPECT_EQ((ScanRef<int32_t, ops::Sum<int32_t>>(in, true)), (std::vector<int32_t>{0, 1, 3}));
  EXPECT_EQ((ScanRef<int32_t, ops::Sum<int32_t>>({}, true)), std::vector<int32_t>{});
}

TEST(Reference, OtherOperators) {
  const std::vector<int64_t> in = {3, -1, 4, -1, 5};
  EXPECT_EQ((ScanRef<int64_t, ops::Product<int64_t>>(in, false)),
            (std::vector<int64_t>{3, -3, -12, 12, 60}));
  EXPECT_EQ((ScanRef<int64_t, ops::Min<int64_t>>(in, false)),
            (std::vector<int64_t>{3, -1, -1, -1, -1}));
  EXPECT_EQ((ScanRef<int64_t, ops::Max<int64_t>>(in, true)),
            (std::vector<int64_t>{std::numeric_limits<int64_t>::min(), 3, 3, 4, 4}));
  const std::vector<uint32_t> bits = {0b1100, 0b1010, 0b0110};
  EXPECT_EQ((ScanRef<uint32_t, ops::BitAnd<uint32_t>>(bits, false)),
            (std::vector<uint32_t>{0b1100, 0b1000, 0b0000}));
  EXPECT_EQ((ScanRef<uint32_t, ops::BitOr<uint32_t>>(bits, true)),
            (std::vector<uint32_t>{0, 0b1100, 0b1110}));
  EXPECT_EQ((ScanRef<uint32_t, ops::BitXor<uint32_t>>(bits, false)),
            (std::vector<uint32_t>{0b1100, 0b0110, 0b0000}));
  EXPECT_EQ((ReduceRef<uint32_t, ops::BitAnd<uint32_t>>({})), 0xFFFFFFFFu);
  EXPECT_EQ((ReduceRef<int32_t, ops::Sum<int32_t>>({std::numeric_limits<int32_t>::max(), 1})),
            std::numeric_limits<int32_t>::min());
  EXPECT_EQ((ReduceRef<double, ops::Product<double>>({2.0, 0.5, -3.0})), -3.0);
}

TEST(Reference, CompactWithFlagsAndPredicates) {
  const std::vector<float> v = {1.f, NAN, -2.f, 0.f, 5.f};
  const auto byflags = CompactRef(v, std::vector<uint8_t>{0, 7, 1, 0, 255}, 10);
  EXPECT_TRUE(ExpectEqualValues(byflags.values, std::vector<float>{NAN, -2.f, 5.f}));
  EXPECT_EQ(byflags.indices, (std::vector<int64_t>{11, 12, 14}));
  EXPECT_EQ(CompactRef(v, PredicateOp::kNe, 1.f).indices, (std::vector<int64_t>{1, 2, 3, 4}));
  EXPECT_EQ(CompactRef(v, PredicateOp::kLt, 1.f).indices, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(CompactRef(v, PredicateOp::kInRange, 0.f, 5.f).indices,
            (std::vector<int64_t>{0, 3}));
  EXPECT_EQ(CompactRef(v, PredicateOp::kNotNan, 0.f).indices,
            (std::vector<int64_t>{0, 2, 3, 4}));
  EXPECT_EQ(CompactRef(v, PredicateOp::kNonzero, 0.f).indices,
            (std::vector<int64_t>{0, 1, 2, 4}));
  const std::vector<int32_t> i = {3, 0, -3};
  EXPECT_EQ(CompactRef(i, PredicateOp::kNotNan, 0).indices, (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(CompactRef(i, PredicateOp::kGe, 0).values, (std::vector<int32_t>{3, 0}));
}

TEST(Reference, SameValueTreatsNanAsEqualAndSignedZerosAsDifferent) {
  EXPECT_TRUE(SameValue(NAN, -NAN));
  EXPECT_FALSE(SameValue(0.0, -0.0));
  EXPECT_FALSE(SameValue(NAN, 1.0f));
  EXPECT_TRUE(SameValue(INFINITY, INFINITY));
  EXPECT_FALSE(SameValue(-INFINITY, INFINITY));
}

TEST(Reference, ScanNearToleratesRoundingButNotLostElements) {
  const std::vector<float> in = {1e8f, 1.f, -1e8f, 1.f};
  const auto ref = ScanRef<float, ops::Sum<float>>(in, false);
  std::vector<float> got = ref;
  got[2] += 4.f;  // within 16 * eps * 2e8
  EXPECT_TRUE((ExpectScanNear<float, ops::Sum<float>>(got, ref, in, false)));
  const std::vector<float> small = {1.f, 2.f, 3.f, 4.f};
  std::vector<float> lost = ScanRef<float, ops::Sum<float>>(small, false);
  const auto ref_small = lost;
  lost[2] -= 3.f;
  EXPECT_NONFATAL_FAILURE(
      (ExpectScanNear<float, ops::Sum<float>>(lost, ref_small, small, false, "lost")),
      "first at [2]");
  // Exact operators are compared exactly, NaN against NaN.
  std::vector<double> nan_ref = {1.0, NAN}, nan_got = {1.0, NAN};
  EXPECT_TRUE((ExpectScanNear<double, ops::Min<double>>(nan_got, nan_ref, nan_ref, false)));
  nan_got[1] = 1.0;
  EXPECT_NONFATAL_FAILURE((ExpectScanNear<double, ops::Min<double>>(nan_got, nan_ref, nan_ref,
                                                                   false, "nan")),
                          "1 of 2 elements differ");
}

TEST(Reference, RandomInputsAreNeverAllZeroOrIdentity) {
  GPUSCAN_SEEDED_RNG(rng);
  for (std::size_t n : {1, 2, 5, 1000}) {
    const auto sum = RandomInput<int32_t, ops::Sum<int32_t>>(n, rng);
    const auto band = RandomInput<uint64_t, ops::BitAnd<uint64_t>>(n, rng);
    const auto bor = RandomInput<int64_t, ops::BitOr<int64_t>>(n, rng);
    const auto prod = RandomInput<uint32_t, ops::Product<uint32_t>>(n, rng);
    EXPECT_NE((ReduceRef<int32_t, ops::BitOr<int32_t>>(sum)), 0);
    EXPECT_NE((ReduceRef<uint64_t, ops::BitAnd<uint64_t>>(band)), ~uint64_t{0});
    EXPECT_NE((ReduceRef<int64_t, ops::BitOr<int64_t>>(bor)), 0);
    EXPECT_NE((ReduceRef<uint32_t, ops::Product<uint32_t>>(prod)), 0u);  // odd factors
  }
  // The running AND of a long array still has bits left (so a wrong carry would show).
  const auto band = RandomInput<uint32_t, ops::BitAnd<uint32_t>>(1000000, rng);
  EXPECT_NE((ReduceRef<uint32_t, ops::BitAnd<uint32_t>>(band)), 0u);
  const auto chunks = RandomChunkLengths(12345, rng, 100);
  std::size_t total = 0;
  for (std::size_t c : chunks) total += c;
  EXPECT_EQ(total, 12345u);
}

}  // namespace
}  // namespace gpuscan::testing
