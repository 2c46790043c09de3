// Issue 11: float SUM/PRODUCT scans and reductions on the CPU engine give the canonical tree's
// bits (tests/common/canonical_reference.h) whatever the chunking, the thread count or the
// concurrent load.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <thread>

#include "canonical_reference.h"
#include "engine_runner.h"

namespace gpuscan::unit {
namespace {

using testing::CanonicalReduceRef;
using testing::CanonicalScanRef;

// Inputs whose sums and products round a lot: magnitudes over 2^±12 for SUM, factors near 1
// for PRODUCT (so a long product stays finite).
template <class T>
std::vector<T> CanonicalInput(std::mt19937_64& rng, std::size_t n, Op op) {
  std::vector<T> x(n);
  for (T& v : x) {
    if (op == Op::kProduct) {
      v = std::exp(testing::UniformReal<T>(rng, T(-0.01), T(0.01)));
    } else {
      v = std::ldexp(testing::UniformReal<T>(rng, T(-1), T(1)), testing::UniformInt<int>(rng, -12, 12));
    }
  }
  return x;
}

// Chunkings of n elements: all in one, fixed byte sizes, and odd lengths.
template <class T>
std::vector<std::pair<std::string, std::vector<std::size_t>>> Chunkings(std::size_t n, std::mt19937_64& rng) {
  std::vector<std::pair<std::string, std::vector<std::size_t>>> out;
  auto fixed = [&](std::size_t len) {
    std::vector<std::size_t> c;
    for (std::size_t off = 0; off < n; off += len) c.push_back(std::min(len, n - off));
    return c;
  };
  out.push_back({"whole", n ? std::vector<std::size_t>{n} : std::vector<std::size_t>{}});
  for (std::size_t bytes : {std::size_t{4} << 10, std::size_t{1} << 20, std::size_t{4} << 20}) {
    out.push_back({std::to_string(bytes) + " bytes", fixed(bytes / sizeof(T))});
  }
  out.push_back({"4097 elements", fixed(4097)});
  out.push_back({"4095 elements", fixed(4095)});
  std::vector<std::size_t> odd;
  for (std::size_t off = 0; off < n;) {
    const std::size_t len = std::min(n - off, testing::UniformInt<std::size_t>(rng, 1, 300000));
    odd.push_back(len);
    off += len;
  }
  out.push_back({"random odd", odd});
  return out;
}

template <class T>
bool SameBits(const T& a, const T& b) {
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

template <class T>
void ExpectBitIdentical(const std::vector<T>& got, const std::vector<T>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (!SameBits(got[i], want[i])) {
      ADD_FAILURE() << what << ": first difference at [" << i << "]: " << got[i] << " vs canonical " << want[i];
      return;
    }
  }
}

DType DTypeOf(float) { return DType::kFloat32; }
DType DTypeOf(double) { return DType::kFloat64; }

template <class T, class O>
void CheckAllChunkings(std::size_t n, Op op) {
  GPUSCAN_SEEDED_RNG(rng);
  const std::vector<T> x = CanonicalInput<T>(rng, n, op);
  CpuEngine one(1), many(0);
  for (bool exclusive : {false, true}) {
    const std::vector<T> want = CanonicalScanRef<T, O>(x, exclusive);
    ScanSpec spec;
    spec.dtype = DTypeOf(T{});
    spec.op = op;
    spec.exclusive = exclusive;
    for (const auto& [name, chunks] : Chunkings<T>(n, rng)) {
      for (CpuEngine* e : {&one, &many}) {
        const std::string what = std::string(exclusive ? "exclusive" : "inclusive") + ", n=" +
                                 std::to_string(n) + ", chunks " + name + ", threads " +
                                 std::to_string(e->threads());
        ExpectBitIdentical(RunScan(*e, spec, x, chunks), want, what);
        if (!exclusive) {
          ReduceSpec rspec{spec.dtype, op};
          const T r = RunReduce(*e, rspec, x, chunks);
          const T rw = CanonicalReduceRef<T, O>(x);
          EXPECT_TRUE(SameBits(r, rw)) << "reduce, " << what << ": " << r << " vs canonical " << rw;
        }
      }
    }
  }
}

TEST(CpuDeterministic, EdgeLengthsAnyChunking) {
  for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{15}, std::size_t{16}, std::size_t{17},
                        std::size_t{4095}, std::size_t{4096}, std::size_t{4097}, std::size_t{3 * 4096 + 5}}) {
    CheckAllChunkings<float, ops::Sum<float>>(n, Op::kSum);
  }
}

// Crosses supers (2^20 elements) with partial tiles and a partial super at the end.
TEST(CpuDeterministic, Float32SumAcrossSupers) { CheckAllChunkings<float, ops::Sum<float>>((2u << 20) + 12345, Op::kSum); }
TEST(CpuDeterministic, Float32Product) { CheckAllChunkings<float, ops::Product<float>>((1u << 20) + 4097, Op::kProduct); }
TEST(CpuDeterministic, Float64Sum) { CheckAllChunkings<double, ops::Sum<double>>((1u << 20) + 777, Op::kSum); }
TEST(CpuDeterministic, Float64Product) { CheckAllChunkings<double, ops::Product<double>>(300001, Op::kProduct); }

TEST(CpuDeterministic, ExactlyWholeSupersAndTiles) {
  CheckAllChunkings<float, ops::Sum<float>>(std::size_t{1} << 21, Op::kSum);
}

TEST(CpuDeterministic, ConcurrentSessionsAgree) {
  GPUSCAN_SEEDED_RNG(rng);
  const std::size_t n = (1u << 20) + 999;
  const std::vector<float> x = CanonicalInput<float>(rng, n, Op::kSum);
  const std::vector<float> want = CanonicalScanRef<float, ops::Sum<float>>(x, false);
  CpuEngine engine(0);
  ScanSpec spec;
  spec.dtype = DType::kFloat32;
  std::vector<std::vector<float>> got(6);
  std::vector<std::thread> threads;
  for (std::size_t k = 0; k < got.size(); ++k) {
    threads.emplace_back([&, k] {
      std::vector<std::size_t> chunks;
      const std::size_t len = 1000 + 37771 * k;
      for (std::size_t off = 0; off < n; off += len) chunks.push_back(std::min(len, n - off));
      got[k] = RunScan(engine, spec, x, chunks);
    });
  }
  for (auto& t : threads) t.join();
  for (std::size_t k = 0; k < got.size(); ++k) ExpectBitIdentical(got[k], want, "concurrent " + std::to_string(k));
}

TEST(CpuDeterministic, NamesAndDefaults) {
  CpuEngine engine(1);
  ScanSpec spec;
  spec.dtype = DType::kFloat32;
  EXPECT_EQ(engine.NewScan(spec)->algorithm(), "deterministic");
  spec.algorithm = ScanAlgorithm::kDeterministic;
  EXPECT_EQ(engine.NewScan(spec)->algorithm(), "deterministic");
  spec.algorithm = ScanAlgorithm::kCpuBlocked;  // asked for by name: the chunk-relative path
  EXPECT_EQ(engine.NewScan(spec)->algorithm(), "cpu_blocked");
  spec.algorithm = ScanAlgorithm::kDefault;
  spec.op = Op::kMax;  // exact in any order: the blocked path
  EXPECT_EQ(engine.NewScan(spec)->algorithm(), "cpu_blocked");
  EXPECT_EQ(engine.NewReduce(ReduceSpec{DType::kFloat64, Op::kProduct})->algorithm(), "deterministic");
  EXPECT_EQ(engine.float_scan_default(), ScanAlgorithm::kDeterministic);
}

// The check above can see a difference: the chunk-relative cpu_blocked path (asked for by
// name) gives other bits for other chunkings of the same input.
TEST(CpuDeterministic, ChunkRelativePathDiffersSoTheCheckCanFail) {
  GPUSCAN_SEEDED_RNG(rng);
  const std::size_t n = (1u << 20) + 5;
  const std::vector<float> x = CanonicalInput<float>(rng, n, Op::kSum);
  CpuEngine engine(1);
  ScanSpec spec;
  spec.dtype = DType::kFloat32;
  spec.algorithm = ScanAlgorithm::kCpuBlocked;
  std::vector<std::size_t> odd;
  for (std::size_t off = 0; off < n; off += 4097) odd.push_back(std::min<std::size_t>(4097, n - off));
  const std::vector<float> a = RunScan(engine, spec, x, {n});
  const std::vector<float> b = RunScan(engine, spec, x, odd);
  EXPECT_NE(std::memcmp(a.data(), b.data(), n * sizeof(float)), 0);
  spec.algorithm = ScanAlgorithm::kDefault;
  const std::vector<float> c = RunScan(engine, spec, x, {n});
  const std::vector<float> d = RunScan(engine, spec, x, odd);
  EXPECT_EQ(std::memcmp(c.data(), d.data(), n * sizeof(float)), 0);
}

// Not a pass/fail on accuracy beyond a loose bound: reports how far the canonical float32 sum
// lands from a float64 sum of the same inputs, next to a plain sequential float32 loop.
TEST(CpuDeterministic, AccuracyReport) {
  GPUSCAN_SEEDED_RNG(rng);
  const std::size_t n = std::size_t{1} << 22;
  std::vector<float> x(n);
  for (float& v : x) v = testing::UniformReal<float>(rng, 0.0f, 1.0f);  // same-sign: no cancellation
  CpuEngine engine(0);
  ScanSpec spec;
  spec.dtype = DType::kFloat32;
  const std::vector<float> tree = RunScan(engine, spec, x, {n});
  double exact = 0, worst_tree = 0, worst_seq = 0;
  float seq = 0;
  for (std::size_t i = 0; i < n; ++i) {
    exact += x[i];
    seq += x[i];
    worst_tree = std::max(worst_tree, std::abs(tree[i] - exact) / exact);
    worst_seq = std::max(worst_seq, std::abs(seq - exact) / exact);
  }
  std::printf("float32 sum of 2^22 uniform [0,1): max relative error vs float64: canonical tree %.3g, "
              "sequential loop %.3g\n", worst_tree, worst_seq);
  RecordProperty("canonical_max_rel_err", std::to_string(worst_tree));
  RecordProperty("sequential_max_rel_err", std::to_string(worst_seq));
  EXPECT_LT(worst_tree, 1e-5);
}

}  // namespace
}  // namespace gpuscan::unit
