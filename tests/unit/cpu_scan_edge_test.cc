// Hand-picked scans: integer wrap-around, NaN / infinity / signed zeros, identities, carries
// across chunks, unaligned buffers, timing.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "engine_runner.h"

namespace gpuscan::unit {
namespace {

template <class T>
std::vector<T> Scan(DType dtype, Op op, bool exclusive, const std::vector<T>& in,
                    const std::vector<std::size_t>& chunks) {
  CpuEngine engine(4);
  ScanSpec spec;
  spec.dtype = dtype;
  spec.op = op;
  spec.exclusive = exclusive;
  return RunScan(engine, spec, in, chunks);
}

// Scans as one chunk and as single-element chunks; both must equal `want` exactly.
template <class T>
void ExpectScan(DType dtype, Op op, bool exclusive, const std::vector<T>& in,
                const std::vector<T>& want) {
  testing::ExpectEqualValues(Scan(dtype, op, exclusive, in, OneChunk(in)), want, "one chunk");
  testing::ExpectEqualValues(
      Scan(dtype, op, exclusive, in, std::vector<std::size_t>(in.size(), 1)), want,
      "one element per chunk");
}

constexpr float kNaNf = std::numeric_limits<float>::quiet_NaN();
constexpr float kInff = std::numeric_limits<float>::infinity();
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

TEST(CpuScanEdge, IntegerSumWrapsAround) {
  constexpr int32_t kMax = std::numeric_limits<int32_t>::max();
  constexpr int32_t kMin = std::numeric_limits<int32_t>::min();
  ExpectScan<int32_t>(DType::kInt32, Op::kSum, false, {kMax, 1, 1, -3},
                      {kMax, kMin, kMin + 1, kMax - 1});
  ExpectScan<uint32_t>(DType::kUInt32, Op::kSum, true, {0xFFFFFFFFu, 2, 5}, {0, 0xFFFFFFFFu, 1});
  ExpectScan<int64_t>(DType::kInt64, Op::kSum, false,
                      {std::numeric_limits<int64_t>::max(), 1},
                      {std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min()});
}

TEST(CpuScanEdge, IntegerProductWrapsAround) {
  constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
  ExpectScan<uint64_t>(DType::kUInt64, Op::kProduct, false, {uint64_t{1} << 32, uint64_t{1} << 32, 3},
                       {uint64_t{1} << 32, 0, 0});
  ExpectScan<uint64_t>(DType::kUInt64, Op::kProduct, false, {kMax, kMax, 3}, {kMax, 1, 3});
  ExpectScan<int64_t>(DType::kInt64, Op::kProduct, false,
                      {std::numeric_limits<int64_t>::max(), 2}, {std::numeric_limits<int64_t>::max(), -2});
  ExpectScan<int32_t>(DType::kInt32, Op::kProduct, false, {65536, 65536, 7}, {65536, 0, 0});
  ExpectScan<int32_t>(DType::kInt32, Op::kProduct, false, {-1, std::numeric_limits<int32_t>::min()},
                      {-1, std::numeric_limits<int32_t>::min()});
  // 3^k mod 2^32 over a long array, across blocks and chunks.
  std::vector<uint32_t> threes(CpuEngine::kParallelMinElems * 3 + 7, 3u);
  std::vector<uint32_t> want(threes.size());
  uint32_t p = 1;
  for (std::size_t i = 0; i < want.size(); ++i) want[i] = p *= 3u;
  testing::ExpectEqualValues(Scan(DType::kUInt32, Op::kProduct, false, threes, OneChunk(threes)),
                             want);
}

TEST(CpuScanEdge, NanPropagatesThroughSumMinMax) {
  ExpectScan<float>(DType::kFloat32, Op::kSum, false, {1, kNaNf, 2}, {1, kNaNf, kNaNf});
  ExpectScan<float>(DType::kFloat32, Op::kMin, false, {3, kNaNf, 1, -kInff}, {3, kNaNf, kNaNf, kNaNf});
  ExpectScan<double>(DType::kFloat64, Op::kMax, false, {3, kNaN, 9, kInf}, {3, kNaN, kNaN, kNaN});
  ExpectScan<double>(DType::kFloat64, Op::kMax, true, {3, kNaN, 9}, {-kInf, 3, kNaN});
  ExpectScan<double>(DType::kFloat64, Op::kProduct, false, {2, kNaN, 0}, {2, kNaN, kNaN});
}

TEST(CpuScanEdge, NanInTheMiddleOfALongArrayPoisonsEverythingAfterIt) {
  GPUSCAN_SEEDED_RNG(rng);
  const std::size_t n = CpuEngine::kParallelMinElems * 4 + 11;
  const std::size_t at = n / 2 + 3;
  for (Op op : {Op::kSum, Op::kMin, Op::kMax}) {
    SCOPED_TRACE(engine::Name(op));
    std::vector<double> in(n);
    for (double& x : in) x = testing::UniformReal<double>(rng, -10, 10);
    in[at] = kNaN;
    const auto chunks = testing::RandomChunkLengths(n, rng, CpuEngine::kBlockElems);
    for (const auto& c : {OneChunk(in), chunks}) {
      const auto out = Scan(DType::kFloat64, op, false, in, c);
      for (std::size_t i = 0; i < n; ++i) {
        if (std::isnan(out[i]) != (i >= at)) {
          ADD_FAILURE() << "element " << i << " is " << out[i] << " (NaN at " << at << ")";
          break;
        }
      }
    }
  }
}

TEST(CpuScanEdge, Infinities) {
  ExpectScan<float>(DType::kFloat32, Op::kSum, false, {1, kInff, 2}, {1, kInff, kInff});
  ExpectScan<float>(DType::kFloat32, Op::kSum, false, {kInff, -kInff, 1}, {kInff, kNaNf, kNaNf});
  ExpectScan<double>(DType::kFloat64, Op::kMin, false, {5, -kInf, 7}, {5, -kInf, -kInf});
  ExpectScan<double>(DType::kFloat64, Op::kMax, false, {5, kInf, 7}, {5, kInf, kInf});
  ExpectScan<double>(DType::kFloat64, Op::kProduct, false, {-2, kInf, -1}, {-2, -kInf, kInf});
}

TEST(CpuScanEdge, SignedZerosInMinMax) {
  ExpectScan<float>(DType::kFloat32, Op::kMin, false, {+0.f, -0.f, +0.f}, {+0.f, -0.f, -0.f});
  ExpectScan<float>(DType::kFloat32, Op::kMin, false, {-0.f, +0.f}, {-0.f, -0.f});
  ExpectScan<double>(DType::kFloat64, Op::kMax, false, {-0.0, +0.0, -0.0}, {-0.0, +0.0, +0.0});
  ExpectScan<double>(DType::kFloat64, Op::kMax, false, {+0.0, -0.0}, {+0.0, +0.0});
}

TEST(CpuScanEdge, ExclusiveStartsWithTheIdentity) {
  CpuEngine engine(2);
  for (DType d : engine::kAllDTypes) {
    for (Op op : engine::kAllOps) {
      if (engine::IsFloat(d) && engine::IsBitwise(op)) continue;
      engine::Visit(d, op, [&](auto t, auto o) {
        using T = typename decltype(t)::type;
        using O = typename decltype(o)::type;
        SCOPED_TRACE(std::string(engine::Name(d)) + " " + std::string(engine::Name(op)));
        ScanSpec spec;
        spec.dtype = d;
        spec.op = op;
        spec.exclusive = true;
        const std::vector<T> in = {T(7), T(3)};
        const auto out = RunScan(engine, spec, in, {0, 1, 0, 1});
        EXPECT_TRUE(testing::SameValue(out[0], O::identity())) << testing::Show(out[0]);
        EXPECT_TRUE(testing::SameValue(out[1], T(7))) << testing::Show(out[1]);
      });
    }
  }
}

TEST(CpuScanEdge, TheNextChunkContinuesTheScan) {
  CpuEngine engine(2);
  ScanSpec spec;
  spec.dtype = DType::kInt64;
  auto session = engine.NewScan(spec);
  StageTimes times;
  const int64_t a[] = {1, 2, 3};
  const int64_t b[] = {10, 20};
  int64_t out[3];
  session->Process(a, out, 3, times);
  EXPECT_EQ(out[2], 6);
  session->Process(b, out, 0, times);
  session->Process(b, out, 2, times);
  EXPECT_EQ(out[0], 16);
  EXPECT_EQ(out[1], 36);
  EXPECT_EQ(session->algorithm(), "cpu_blocked");
}

TEST(CpuScanEdge, UnalignedBuffersGiveTheSameBits) {
  GPUSCAN_SEEDED_RNG(rng);
  CpuEngine engine(4);
  const std::size_t n = CpuEngine::kParallelMinElems * 2 + 5;
  const auto in = testing::RandomInput<double, ops::Sum<double>>(n, rng);
  const auto chunks = testing::RandomChunkLengths(n, rng, CpuEngine::kBlockElems * 5);
  ScanSpec spec;
  spec.dtype = DType::kFloat64;
  const auto aligned = RunScan(engine, spec, in, chunks);
  // The same bytes one past an aligned address in, three past out.
  std::vector<unsigned char> in_bytes(n * sizeof(double) + 16), out_bytes(n * sizeof(double) + 16);
  std::memcpy(in_bytes.data() + 1, in.data(), n * sizeof(double));
  auto session = engine.NewScan(spec);
  StageTimes times;
  std::size_t offset = 0;
  for (std::size_t len : chunks) {
    session->Process(in_bytes.data() + 1 + offset * sizeof(double),
                     out_bytes.data() + 3 + offset * sizeof(double), len, times);
    offset += len;
  }
  std::vector<double> unaligned(n);
  std::memcpy(unaligned.data(), out_bytes.data() + 3, n * sizeof(double));
  testing::ExpectSameBits(unaligned, aligned);
}

TEST(CpuScanEdge, ReportsKernelTimeOnly) {
  CpuEngine engine(2);
  ScanSpec spec;
  spec.dtype = DType::kFloat32;
  std::vector<float> in(std::size_t{1} << 22, 1.0f);
  StageTimes times;
  const auto out = RunScan(engine, spec, in, OneChunk(in), &times);
  EXPECT_EQ(out.back(), float(std::size_t{1} << 22));
  EXPECT_GT(times.kernel_us, 0u);
  EXPECT_EQ(times.h2d_us, 0u);
  EXPECT_EQ(times.d2h_us, 0u);
}

}  // namespace
}  // namespace gpuscan::unit
