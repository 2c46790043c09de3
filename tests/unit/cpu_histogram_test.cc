// CPU engine histograms against testing::HistogramRef: every dtype, even and explicit edges,
// elements on the edges, out of range, NaN and infinities; the same counts whatever the chunking
// and thread count; the even edges are numpy.linspace's; bad edges are refused.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "engine_runner.h"
#include "gpuscan/kernels/histogram_bins.h"

namespace gpuscan::unit {
namespace {

TEST(HistogramEdges, EvenEdgesAreNumpyLinspace) {
  // numpy.linspace(0, 1, 11): i * 0.1 + 0, so 3 * 0.1 = 0.30000000000000004.
  const std::vector<double> e = hist::EvenEdges(0, 1, 10, false);
  const std::vector<double> want = {0.0, 0.1, 0.2, 0.30000000000000004, 0.4, 0.5, 0.6000000000000001,
                                    0.7000000000000001, 0.8, 0.9, 1.0};
  EXPECT_EQ(e, want);
  // float32: every edge rounded to float32 (numpy computes a float32 array's edges so).
  const std::vector<double> f = hist::EvenEdges(0, 1, 10, true);
  for (size_t i = 0; i < f.size(); ++i) EXPECT_EQ(f[i], static_cast<double>(static_cast<float>(want[i]))) << i;
  EXPECT_EQ(hist::EvenEdges(-3.5, 2.25, 1, false), (std::vector<double>{-3.5, 2.25}));
}

TEST(HistogramEdges, SlotOfFollowsTheEdgesNotTheArithmetic) {
  // Repeated edges: an element on them goes to the last bin starting there; the top edge to the
  // last bin; below, above and NaN to their slots.
  const std::vector<double> e = {0, 1, 1, 1, 2, 4};
  const hist::Bins b = hist::MakeBins(e.data(), 5, false);
  EXPECT_EQ(hist::SlotOf(0.0, b), 0u);
  EXPECT_EQ(hist::SlotOf(0.999, b), 0u);
  EXPECT_EQ(hist::SlotOf(1.0, b), 3u);
  EXPECT_EQ(hist::SlotOf(4.0, b), 4u);
  EXPECT_EQ(hist::SlotOf(-0.5, b), 5u + hist::kBelow);
  EXPECT_EQ(hist::SlotOf(4.5, b), 5u + hist::kAbove);
  EXPECT_EQ(hist::SlotOf(std::nan(""), b), 5u + hist::kNan);
  // Even bins whose float64 guess lands one bin off: the edges decide.
  const std::vector<double> even = hist::EvenEdges(0, 1, 10, false);
  const hist::Bins eb = hist::MakeBins(even.data(), 10, true);
  EXPECT_EQ(hist::SlotOf(0.30000000000000004, eb), 3u);
  EXPECT_EQ(hist::SlotOf(0.3, eb), 2u);  // below the edge 0.30000000000000004
  EXPECT_EQ(hist::SlotOf(1.0, eb), 9u);
}

template <class T>
void ExpectHistograms(const char* name) {
  SCOPED_TRACE(name);
  GPUSCAN_SEEDED_RNG(rng);
  CpuEngine one(1), many(0);
  for (const bool even : {true, false}) {
    HistogramSpec spec;
    spec.dtype = DTypeOf<T>();
    spec.even = even;
    spec.edges = even ? hist::EvenEdges(-97.3, 101.9, 37, spec.dtype == DType::kFloat32)
                      : std::vector<double>{-100, -50, -50, -3.25, 0, 0, 7, 64, 64, 99.5};
    for (const std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{5000}, std::size_t{200003}}) {
      const std::vector<T> x = testing::HistogramInput<T>(n, spec.edges, rng);
      const std::vector<uint64_t> want = testing::HistogramRef(x, spec.edges);
      EXPECT_EQ(RunHistogram(one, spec, x, {n}), want) << "even=" << even << " n=" << n;
      EXPECT_EQ(RunHistogram(many, spec, x, {n}), want) << "even=" << even << " n=" << n << " (threads)";
      const auto chunks = testing::RandomChunkLengths(n, rng, 70001);
      EXPECT_EQ(RunHistogram(many, spec, x, chunks), want) << "even=" << even << " " << Describe(chunks);
    }
  }
}

TEST(CpuHistogram, EveryDTypeMatchesTheReference) {
  ExpectHistograms<int32_t>("int32");
  ExpectHistograms<int64_t>("int64");
  ExpectHistograms<uint32_t>("uint32");
  ExpectHistograms<uint64_t>("uint64");
  ExpectHistograms<float>("float32");
  ExpectHistograms<double>("float64");
}

TEST(CpuHistogram, LargeIntegersCompareAsFloat64) {
  // 2^53 + 1 rounds to 2^53 as numpy converts it: it lands on the edge 2^53, not below it.
  CpuEngine engine(0);
  HistogramSpec spec;
  spec.dtype = DType::kInt64;
  spec.edges = {0, 9007199254740992.0, 1e19};
  const std::vector<int64_t> x = {(int64_t{1} << 53) + 1, (int64_t{1} << 53) - 1, 5};
  EXPECT_EQ(RunHistogram(engine, spec, x, {3}), (std::vector<uint64_t>{2, 1, 0, 0, 0}));
}

TEST(CpuHistogram, BadEdgesAreRefused) {
  CpuEngine engine(1);
  HistogramSpec spec;
  spec.edges = {1};
  EXPECT_THROW(engine.NewHistogram(spec), engine::Error);
  spec.edges = {0, 2, 1};
  EXPECT_THROW(engine.NewHistogram(spec), engine::Error);
  spec.edges = {0, std::nan(""), 1};
  EXPECT_THROW(engine.NewHistogram(spec), engine::Error);
  spec.edges.assign(engine::kMaxHistogramBins + 2, 1.0);
  EXPECT_THROW(engine.NewHistogram(spec), engine::Error);
  spec.edges.assign(engine::kMaxHistogramBins + 1, 1.0);
  EXPECT_NO_THROW(engine.NewHistogram(spec));
}

}  // namespace
}  // namespace gpuscan::unit
