// Issue 11 on the CUDA engine: float SUM/PRODUCT scans and reductions give the canonical
// tree's bits whatever the chunking (4 KiB, 1 MiB, 4 MiB, odd), run to run, under concurrent
// sessions, and the same bits as the CPU engine with 1 and with all threads.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "canonical_reference.h"
#include "engine/engine.h"
#include "engine_runner.h"

namespace gpuscan::unit {
namespace {

std::unique_ptr<Engine> MakeCudaOrNull(std::string* reason) {
  engine::EngineOptions o;
  o.kind = engine::EngineKind::kCuda;
  o.devices = {0};
  try {
    return engine::MakeEngine(o, nullptr);
  } catch (const engine::Error& e) {
    *reason = e.what();
    return nullptr;
  }
}

class CudaDeterministicTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { engine_ = MakeCudaOrNull(&skip_reason_).release(); }
  static void TearDownTestSuite() {
    delete engine_;
    engine_ = nullptr;
  }
  void SetUp() override {
    if (!engine_) GTEST_SKIP() << "no CUDA device: " << skip_reason_;
  }
  static Engine* engine_;
  static std::string skip_reason_;
};
Engine* CudaDeterministicTest::engine_ = nullptr;
std::string CudaDeterministicTest::skip_reason_;

template <class T>
std::vector<T> Input(std::mt19937_64& rng, std::size_t n, Op op) {
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

template <class T>
std::vector<std::pair<std::string, std::vector<std::size_t>>> Chunkings(std::size_t n, std::mt19937_64& rng) {
  std::vector<std::pair<std::string, std::vector<std::size_t>>> out;
  auto fixed = [&](std::size_t len) {
    std::vector<std::size_t> c;
    for (std::size_t off = 0; off < n; off += len) c.push_back(std::min(len, n - off));
    return c;
  };
  out.push_back({"whole", fixed(n)});
  for (std::size_t bytes : {std::size_t{4} << 10, std::size_t{1} << 20, std::size_t{4} << 20}) {
    out.push_back({std::to_string(bytes) + " bytes", fixed(bytes / sizeof(T))});
  }
  out.push_back({"4097 elements", fixed(4097)});
  std::vector<std::size_t> odd;
  for (std::size_t off = 0; off < n;) {
    const std::size_t len = std::min(n - off, testing::UniformInt<std::size_t>(rng, 1, 1500000));
    odd.push_back(len);
    off += len;
  }
  out.push_back({"random odd", odd});
  return out;
}

template <class T>
std::string FirstDifference(const std::vector<T>& got, const std::vector<T>& want) {
  if (got.size() != want.size()) return "sizes differ";
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (std::memcmp(&got[i], &want[i], sizeof(T)) != 0) {
      return "first difference at [" + std::to_string(i) + "]: " + std::to_string(got[i]) + " vs " +
             std::to_string(want[i]);
    }
  }
  return "";
}

DType DTypeOf(float) { return DType::kFloat32; }
DType DTypeOf(double) { return DType::kFloat64; }

template <class T, class O>
void CheckEngines(Engine& cuda, std::size_t n, Op op) {
  GPUSCAN_SEEDED_RNG(rng);
  const std::vector<T> x = Input<T>(rng, n, op);
  CpuEngine cpu_one(1), cpu_all(0);
  for (bool exclusive : {false, true}) {
    const std::vector<T> want = testing::CanonicalScanRef<T, O>(x, exclusive);
    ScanSpec spec;
    spec.dtype = DTypeOf(T{});
    spec.op = op;
    spec.exclusive = exclusive;
    for (const auto& [name, chunks] : Chunkings<T>(n, rng)) {
      const std::string what = std::string(exclusive ? "exclusive" : "inclusive") + ", n=" + std::to_string(n) +
                               ", chunks " + name;
      EXPECT_EQ(FirstDifference(RunScan(cuda, spec, x, chunks), want), "") << "cuda, " << what;
      if (name == "random odd" || name == "4096 bytes") {
        EXPECT_EQ(FirstDifference(RunScan(cpu_one, spec, x, chunks), want), "") << "cpu 1 thread, " << what;
        EXPECT_EQ(FirstDifference(RunScan(cpu_all, spec, x, chunks), want), "") << "cpu all threads, " << what;
      }
      if (!exclusive) {
        const T r = RunReduce(cuda, ReduceSpec{spec.dtype, op}, x, chunks);
        const T rw = testing::CanonicalReduceRef<T, O>(x);
        EXPECT_EQ(std::memcmp(&r, &rw, sizeof(T)), 0) << "cuda reduce, " << what << ": " << r << " vs " << rw;
      }
    }
  }
}

// Past two supers (2^20) and several 2 MiB sub-chunks, ending mid-tile.
TEST_F(CudaDeterministicTest, Float32SumAnyChunkingMatchesCpu) {
  CheckEngines<float, ops::Sum<float>>(*engine_, (std::size_t{5} << 19) + 12345, Op::kSum);
}
TEST_F(CudaDeterministicTest, Float32Product) {
  CheckEngines<float, ops::Product<float>>(*engine_, (std::size_t{1} << 20) + 4097, Op::kProduct);
}
TEST_F(CudaDeterministicTest, Float64Sum) {
  CheckEngines<double, ops::Sum<double>>(*engine_, (std::size_t{3} << 19) + 777, Op::kSum);
}
TEST_F(CudaDeterministicTest, Float64Product) {
  CheckEngines<double, ops::Product<double>>(*engine_, 700001, Op::kProduct);
}
TEST_F(CudaDeterministicTest, EdgeLengths) {
  for (std::size_t n : {std::size_t{1}, std::size_t{16}, std::size_t{4095}, std::size_t{4096}, std::size_t{4097},
                        std::size_t{1} << 20, (std::size_t{1} << 20) + 1}) {
    CheckEngines<float, ops::Sum<float>>(*engine_, n, Op::kSum);
  }
}

TEST_F(CudaDeterministicTest, ConcurrentSessionsAndRepeatedRuns) {
  GPUSCAN_SEEDED_RNG(rng);
  const std::size_t n = (std::size_t{3} << 20) + 999;
  const std::vector<float> x = Input<float>(rng, n, Op::kSum);
  const std::vector<float> want = testing::CanonicalScanRef<float, ops::Sum<float>>(x, false);
  ScanSpec spec;
  spec.dtype = DType::kFloat32;
  std::vector<std::vector<float>> got(12);
  std::vector<std::thread> threads;
  for (std::size_t k = 0; k < got.size(); ++k) {
    threads.emplace_back([&, k] {
      std::vector<std::size_t> chunks;
      const std::size_t len = k % 3 == 0 ? (std::size_t{1} << 18) : 1000 + 377771 * k;
      for (std::size_t off = 0; off < n; off += len) chunks.push_back(std::min(len, n - off));
      got[k] = RunScan(*engine_, spec, x, chunks);
    });
  }
  for (auto& t : threads) t.join();
  for (std::size_t k = 0; k < got.size(); ++k) EXPECT_EQ(FirstDifference(got[k], want), "") << "session " << k;
}

TEST_F(CudaDeterministicTest, NamesAndDefaults) {
  ScanSpec spec;
  spec.dtype = DType::kFloat32;
  EXPECT_EQ(engine_->NewScan(spec)->algorithm(), "deterministic");
  spec.algorithm = ScanAlgorithm::kDeterministic;
  EXPECT_EQ(engine_->NewScan(spec)->algorithm(), "deterministic");
  spec.algorithm = ScanAlgorithm::kDecoupledLookback;  // by name: the fast, unreproducible path
  EXPECT_EQ(engine_->NewScan(spec)->algorithm(), "decoupled_lookback");
  spec.algorithm = ScanAlgorithm::kDefault;
  spec.dtype = DType::kInt32;  // exact: the fastest path
  EXPECT_EQ(engine_->NewScan(spec)->algorithm(), "decoupled_lookback");
  spec.algorithm = ScanAlgorithm::kDeterministic;
  EXPECT_EQ(engine_->NewScan(spec)->algorithm(), "decoupled_lookback");
  EXPECT_EQ(engine_->NewReduce(ReduceSpec{DType::kFloat32, Op::kSum})->algorithm(), "deterministic");
  EXPECT_EQ(engine_->NewReduce(ReduceSpec{DType::kFloat32, Op::kMax})->algorithm(), "one_pass");
  EXPECT_EQ(engine_->float_scan_default(), ScanAlgorithm::kDeterministic);
}

}  // namespace
}  // namespace gpuscan::unit
