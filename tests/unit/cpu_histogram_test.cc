// CPU engine histograms against testing::HistogramRef: every dtype, even and explicit edges,
// elements on the edges, out of range, NaN and infinities; the same counts whatever the chunking
// and thread count; the even edges are numpy.linspace's; bad edges are refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <type_traits>
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

// The guess SlotOf trusts for even bins (far from both edges of its bin, by GuessMargin) must
// never differ from the edges' answer: every edge, its neighbours a few ulps away (in float and
// double) and random elements, for ranges of many magnitudes and bin counts, in float (the GPU's
// float32 path) and double arithmetic, against upper_bound over the edges.
template <class E>
void ExpectGuessesSettled(double lo, double hi, uint32_t bins, bool float32, std::mt19937_64& rng) {
  const std::vector<double> edges = hist::EvenEdges(lo, hi, bins, float32);
  const hist::Bins b = hist::MakeBins(edges.data(), bins, true);
  if (std::is_same_v<E, float> && (!float32 || !b.float_edges)) return;  // as the kernel: float32 arrays only
  std::vector<E> e(edges.begin(), edges.end());
  std::vector<double> xs;
  for (const double edge : edges) {
    double up = edge, down = edge;
    float upf = static_cast<float>(edge), downf = upf;
    for (int k = 0; k < 3; ++k) {
      xs.push_back(up = std::nextafter(up, INFINITY));
      xs.push_back(down = std::nextafter(down, -INFINITY));
      xs.push_back(upf = std::nextafter(upf, INFINITY));
      xs.push_back(downf = std::nextafter(downf, -INFINITY));
    }
    xs.push_back(edge);
  }
  for (int k = 0; k < 20000; ++k) xs.push_back(lo + (hi - lo) * (double(rng() >> 11) * 0x1p-53));
  for (double x : xs) {
    if (float32) x = static_cast<float>(x);
    if (x < edges.front() || x > edges.back()) continue;
    const uint32_t want = static_cast<uint32_t>(std::upper_bound(edges.begin(), edges.end() - 1, x) - edges.begin()) - 1;
    const uint32_t got = float32 ? hist::SlotOf(static_cast<float>(x), b, e.data()) : hist::SlotOf(x, b, e.data());
    ASSERT_EQ(got, want) << "x=" << testing::Show(x) << " lo=" << lo << " hi=" << hi << " bins=" << bins
                         << (float32 ? " float32" : " float64") << (sizeof(E) == 4 ? " in float" : " in double");
  }
}

TEST(HistogramEdges, TrustedGuessesMatchTheEdges) {
  GPUSCAN_SEEDED_RNG(rng);
  const double ranges[][2] = {{0, 1}, {-100, 100}, {-1e-3, 7e-3}, {1e6, 1e6 + 3}, {-3e30, 1e31}, {0.1, 0.7}};
  for (const auto& r : ranges) {
    for (const uint32_t bins : {1u, 3u, 7u, 256u, 1000u, 65536u}) {
      for (const bool float32 : {false, true}) {
        ExpectGuessesSettled<double>(r[0], r[1], bins, float32, rng);
        ExpectGuessesSettled<float>(r[0], r[1], bins, float32, rng);
      }
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
