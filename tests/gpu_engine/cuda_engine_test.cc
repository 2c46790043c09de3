// CUDA engine sessions against the sequential reference: every scan algorithm x dtype x
// operator x inclusive/exclusive, sizes around tiles, the engine's 2 MiB sub-chunk and the
// server's chunks, fed as one chunk and as random chunks; reduce (deterministic floats);
// compaction by flags and every predicate. Outputs are poisoned before each run.
#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine_runner.h"
#include "gpuscan/kernels/histogram_bins.h"

namespace gpuscan::unit {
namespace {

// The CUDA engine, or null with the reason when this machine has no usable device.
std::unique_ptr<Engine> CudaOrSkipReason(std::string* reason) {
  engine::EngineOptions o;
  o.kind = engine::EngineKind::kCuda;
  o.devices = {0};  // one device's engine, whatever the machine has (device_set_test.cc: several)
  try {
    return engine::MakeEngine(o, nullptr);
  } catch (const engine::Error& e) {
    *reason = e.what();
    return nullptr;
  }
}

class CudaEngineTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { engine_ = CudaOrSkipReason(&skip_reason_).release(); }
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
Engine* CudaEngineTest::engine_ = nullptr;
std::string CudaEngineTest::skip_reason_;

constexpr std::size_t kSubChunkBytes = std::size_t{2} << 20;  // the engine's staging size

template <class T>
std::vector<std::size_t> GpuSizes(bool full) {
  const std::size_t sub = kSubChunkBytes / sizeof(T);
  std::vector<std::size_t> sizes = {0, 1, 31, 32, 33, 4095, 4096, 4097, 8191, 8193};
  if (full) {
    for (std::size_t n : {sub - 1, sub, sub + 1, 3 * sub + 5}) sizes.push_back(n);
  }
  return sizes;
}

const engine::ScanAlgorithm kAlgorithms[] = {
    engine::ScanAlgorithm::kDecoupledLookback, engine::ScanAlgorithm::kChained,
    engine::ScanAlgorithm::kReduceThenScan,    engine::ScanAlgorithm::kKoggeStone,
    engine::ScanAlgorithm::kBrentKung,         engine::ScanAlgorithm::kBlelloch,
    engine::ScanAlgorithm::kHillisSteele,      engine::ScanAlgorithm::kCub};

TEST_F(CudaEngineTest, EveryScanAlgorithmDTypeOperator) {
  GPUSCAN_SEEDED_RNG(rng);
  for (engine::ScanAlgorithm algo : kAlgorithms) {
    const bool full = algo == engine::ScanAlgorithm::kDecoupledLookback || algo == engine::ScanAlgorithm::kCub;
    for (DType d : engine::kAllDTypes) {
      for (Op op : engine::kAllOps) {
        if (engine::IsFloat(d) && engine::IsBitwise(op)) continue;
        for (bool exclusive : {false, true}) {
          ScanSpec spec;
          spec.dtype = d;
          spec.op = op;
          spec.exclusive = exclusive;
          spec.algorithm = algo;
          engine::Visit(d, op, [&](auto t, auto o) {
            using T = typename decltype(t)::type;
            using O = typename decltype(o)::type;
            for (std::size_t n : GpuSizes<T>(full)) {
              SCOPED_TRACE(::testing::Message() << engine::Name(algo) << " " << engine::Name(d) << " "
                                                << engine::Name(op) << (exclusive ? " exclusive" : " inclusive")
                                                << " n=" << n);
              const std::vector<T> in = testing::RandomInput<T, O>(n, rng);
              const std::vector<T> ref = testing::ScanRef<T, O>(in, exclusive);
              testing::ExpectScanNear<T, O>(RunScan(*engine_, spec, in, OneChunk(in)), ref, in, exclusive,
                                            "one chunk");
              const auto chunks = testing::RandomChunkLengths(n, rng, n / 3 + 1);
              testing::ExpectScanNear<T, O>(RunScan(*engine_, spec, in, chunks), ref, in, exclusive,
                                            Describe(chunks));
            }
          });
          if (HasFailure()) return;
        }
      }
    }
  }
}

TEST_F(CudaEngineTest, LargeDefaultScanEveryDType) {
  GPUSCAN_SEEDED_RNG(rng);
  for (DType d : engine::kAllDTypes) {
    ScanSpec spec;
    spec.dtype = d;
    engine::Visit(d, Op::kSum, [&](auto t, auto o) {
      using T = typename decltype(t)::type;
      using O = typename decltype(o)::type;
      const std::size_t n = (std::size_t{1} << 24) + 7;
      const std::vector<T> in = testing::RandomInput<T, O>(n, rng);
      const std::vector<T> ref = testing::ScanRef<T, O>(in, false);
      const auto chunks = testing::RandomChunkLengths(n, rng, kMiB / sizeof(T));
      testing::ExpectScanNear<T, O>(RunScan(*engine_, spec, in, chunks), ref, in, false,
                                    std::string("2^24+7 ") + std::string(engine::Name(d)));
    });
  }
}

// Integer scans under the default algorithm run small leading chunks (up to 16 KiB) on the
// host and continue on the device from the host's carry: every integer dtype and operator,
// inclusive and exclusive, chunkings that cross the boundary both ways, bit for bit (RunScan
// also runs them pipelined and in place). A 1024-element call copies nothing to the device;
// one that starts with a sub-chunk does.
TEST_F(CudaEngineTest, SmallLeadingIntegerChunksRunOnTheHost) {
  GPUSCAN_SEEDED_RNG(rng);
  constexpr std::size_t kHostBytes = 16 << 10;  // the largest host chunk
  for (DType d : engine::kAllDTypes) {
    if (engine::IsFloat(d)) continue;
    for (Op op : engine::kAllOps) {
      for (bool exclusive : {false, true}) {
        ScanSpec spec;
        spec.dtype = d;
        spec.op = op;
        spec.exclusive = exclusive;
        engine::Visit(d, op, [&](auto t, auto o) {
          using T = typename decltype(t)::type;
          using O = typename decltype(o)::type;
          const std::size_t small = kHostBytes / sizeof(T);
          const std::vector<std::vector<std::size_t>> chunkings = {
              {1024}, {small}, {small + 1}, {1, 100, small, 7}, {3, small - 1, 3 * small + 5, 9, small},
              {kSubChunkBytes / sizeof(T) + 3, 5, 1}};
          for (const auto& chunks : chunkings) {
            std::size_t n = 0;
            for (std::size_t c : chunks) n += c;
            SCOPED_TRACE(::testing::Message() << engine::Name(d) << " " << engine::Name(op)
                                              << (exclusive ? " exclusive" : " inclusive"));
            const std::vector<T> in = testing::RandomInput<T, O>(n, rng);
            StageTimes times;
            testing::ExpectScanNear<T, O>(RunScan(*engine_, spec, in, chunks, &times),
                                          testing::ScanRef<T, O>(in, exclusive), in, exclusive, Describe(chunks));
            if (chunks.size() == 1 && chunks[0] <= small) EXPECT_EQ(times.h2d_us, 0u) << "a small call went to the device";
            if (chunks[0] * sizeof(T) > kSubChunkBytes) EXPECT_GT(times.h2d_us, 0u) << Describe(chunks);
          }
        });
        if (HasFailure()) return;
      }
    }
  }
}

TEST_F(CudaEngineTest, ReduceEveryDTypeOperatorDeterministic) {
  GPUSCAN_SEEDED_RNG(rng);
  for (DType d : engine::kAllDTypes) {
    for (Op op : engine::kAllOps) {
      if (engine::IsFloat(d) && engine::IsBitwise(op)) continue;
      ReduceSpec spec;
      spec.dtype = d;
      spec.op = op;
      engine::Visit(d, op, [&](auto t, auto o) {
        using T = typename decltype(t)::type;
        using O = typename decltype(o)::type;
        for (std::size_t n : GpuSizes<T>(true)) {
          SCOPED_TRACE(::testing::Message() << engine::Name(d) << " " << engine::Name(op) << " n=" << n);
          const std::vector<T> in = testing::RandomInput<T, O>(n, rng);
          const auto chunks = testing::RandomChunkLengths(n, rng, n / 2 + 1);
          const T got = RunReduce(*engine_, spec, in, chunks);
          const T again = RunReduce(*engine_, spec, in, chunks);
          EXPECT_TRUE(testing::SameBits(got, again)) << "not deterministic: " << testing::Show(got) << " vs "
                                                     << testing::Show(again);
          const std::vector<T> ref = testing::ScanRef<T, O>(in, false);
          double abs_sum = 0;
          for (T v : in) abs_sum += std::fabs(double(v));
          const T want = n ? ref.back() : O::identity();
          EXPECT_TRUE((testing::WithinTolerance<T, O>(got, want, abs_sum, double(n))))
              << "got " << testing::Show(got) << ", expected " << testing::Show(want);
        }
      });
    }
  }
}

TEST_F(CudaEngineTest, CompactFlagsAndEveryPredicate) {
  GPUSCAN_SEEDED_RNG(rng);
  const PredicateOp preds[] = {PredicateOp::kNonzero, PredicateOp::kEq, PredicateOp::kNe,
                               PredicateOp::kLt,      PredicateOp::kLe, PredicateOp::kGt,
                               PredicateOp::kGe,      PredicateOp::kInRange, PredicateOp::kNotNan};
  for (DType d : engine::kAllDTypes) {
    engine::VisitDType(d, [&](auto t) {
      using T = typename decltype(t)::type;
      const std::size_t n = 3 * kSubChunkBytes / sizeof(T) + 11;
      const std::vector<T> in = testing::RandomCompactInput<T>(n, rng, engine::IsFloat(d) ? 0.05 : 0.0);
      const auto chunks = testing::RandomChunkLengths(n, rng, kMiB / sizeof(T));
      CompactSpec spec;
      spec.dtype = d;
      spec.want_values = true;
      spec.want_indices = true;
      // Flags.
      spec.use_flags = true;
      const std::vector<uint8_t> flags = testing::RandomFlags(n, rng, 0.5);
      auto got = RunCompact(*engine_, spec, in, &flags, chunks);
      auto ref = testing::CompactRef(in, flags);
      testing::ExpectEqualValues(got.values, ref.values, std::string(engine::Name(d)) + " flags values");
      EXPECT_EQ(got.indices, ref.indices) << engine::Name(d) << " flags indices";
      // Predicates, thresholds taken from the data.
      spec.use_flags = false;
      T lo = in[n / 3], hi = in[n / 2];
      if (hi < lo) std::swap(lo, hi);
      for (PredicateOp p : preds) {
        spec.predicate.op = p;
        std::memcpy(spec.predicate.threshold, &lo, sizeof(T));
        std::memcpy(spec.predicate.upper, &hi, sizeof(T));
        got = RunCompact(*engine_, spec, in, nullptr, chunks);
        ref = testing::CompactRef(in, p, lo, hi);
        const std::string what = std::string(engine::Name(d)) + " " + std::string(engine::Name(p));
        testing::ExpectEqualValues(got.values, ref.values, what + " values");
        EXPECT_EQ(got.indices, ref.indices) << what << " indices";
      }
    });
  }
}

TEST_F(CudaEngineTest, DescribesItsDevice) {
  ASSERT_EQ(engine_->name(), "cuda");
  ASSERT_EQ(engine_->devices().size(), 1u);
  EXPECT_GT(engine_->devices()[0].multiprocessors, 0);
  EXPECT_TRUE(engine_->healthy());
  ScanSpec spec;
  spec.algorithm = engine::ScanAlgorithm::kCpuBlocked;
  EXPECT_THROW(engine_->NewScan(spec), engine::Error);
}

TEST_F(CudaEngineTest, StageTimesComeFromTheDevice) {
  GPUSCAN_SEEDED_RNG(rng);
  const std::vector<int32_t> in = testing::RandomInput<int32_t, ops::Sum<int32_t>>(4 << 20, rng);
  StageTimes times;
  ScanSpec spec;
  RunScan(*engine_, spec, in, OneChunk(in), &times);
  EXPECT_GT(times.h2d_us, 0u);
  EXPECT_GT(times.kernel_us, 0u);
  EXPECT_GT(times.d2h_us, 0u);
}

// Histograms: the shared-memory kernel (few bins) and the global one (more than 2048 bins), even
// and explicit edges, sizes around the staging sub-chunk, random chunkings; the same counts as
// the reference and the CPU engine.
template <class T>
void ExpectGpuHistograms(Engine& gpu, std::mt19937_64& rng) {
  CpuEngine cpu(0);
  for (const uint32_t bins : {37u, 5000u}) {
    for (const bool even : {true, false}) {
      HistogramSpec spec;
      spec.dtype = DTypeOf<T>();
      spec.even = even;
      spec.edges = hist::EvenEdges(-97.3, 101.9, bins, spec.dtype == DType::kFloat32);
      if (!even) {  // uneven, with repeated edges
        for (size_t i = 1; i + 1 < spec.edges.size(); i += 7) spec.edges[i] = spec.edges[i + 1];
      }
      for (const std::size_t n : GpuSizes<T>(true)) {
        const std::vector<T> x = testing::HistogramInput<T>(n, spec.edges, rng);
        const std::vector<uint64_t> want = testing::HistogramRef(x, spec.edges);
        EXPECT_EQ(RunHistogram(gpu, spec, x, {n}), want) << "bins=" << bins << " even=" << even << " n=" << n;
        const auto chunks = testing::RandomChunkLengths(n, rng, kSubChunkBytes / sizeof(T));
        EXPECT_EQ(RunHistogram(gpu, spec, x, chunks), RunHistogram(cpu, spec, x, chunks))
            << "bins=" << bins << " even=" << even << " " << Describe(chunks);
      }
    }
  }
}

TEST_F(CudaEngineTest, HistogramEveryDTypeBothKernels) {
  GPUSCAN_SEEDED_RNG(rng);
  ExpectGpuHistograms<int32_t>(*engine_, rng);
  ExpectGpuHistograms<int64_t>(*engine_, rng);
  ExpectGpuHistograms<uint32_t>(*engine_, rng);
  ExpectGpuHistograms<uint64_t>(*engine_, rng);
  ExpectGpuHistograms<float>(*engine_, rng);
  ExpectGpuHistograms<double>(*engine_, rng);
  EXPECT_EQ(engine_->NewHistogram([] {
    HistogramSpec s;
    s.edges = {0, 1};
    return s;
  }())->algorithm(), "shared_atomics");
}

// Segmented scans: the CUDA engine's (the fused single-pass kernel for exact operators; pairs
// through the canonical tree on the device for float32 SUM/PRODUCT, on the host for float64)
// give the CPU engine's bits exactly, for sizes around the kernel's tiles (2048 4-byte or 1024
// 8-byte values) and the staging sub-chunk, random chunkings, keys of every key dtype and head
// flags, inclusive and exclusive.
template <class T, class O>
void ExpectGpuSegmented(Engine& gpu, CpuEngine& cpu, Op op, std::mt19937_64& rng) {
  const std::size_t sub = kSubChunkBytes / sizeof(T);  // the fused path's sub-chunk (pairs: half)
  for (const std::size_t n : {std::size_t{1}, std::size_t{1023}, std::size_t{2049}, std::size_t{4097}, sub / 2 + 1,
                              sub - 1, sub + 1, 2 * sub + 5}) {
    const std::vector<T> x = testing::RandomInput<T, O>(n, rng);
    for (const int kind : {0, 1, 2}) {
      engine::SegmentedScanSpec spec;
      spec.dtype = DTypeOf<T>();
      spec.op = op;
      spec.exclusive = (n + kind) % 2 == 1;
      std::vector<unsigned char> raw;
      std::vector<uint8_t> heads;
      if (kind == 0) {
        const auto keys = testing::RandomSegmentKeys<int32_t>(n, rng, 1000);
        raw.assign(reinterpret_cast<const unsigned char*>(keys.data()),
                   reinterpret_cast<const unsigned char*>(keys.data() + n));
        heads = testing::HeadsOfKeys(keys);
      } else if (kind == 1) {
        spec.key_dtype = DType::kUInt64;
        const auto keys = testing::RandomSegmentKeys<uint64_t>(n, rng, 30);
        raw.assign(reinterpret_cast<const unsigned char*>(keys.data()),
                   reinterpret_cast<const unsigned char*>(keys.data() + n));
        heads = testing::HeadsOfKeys(keys);
      } else {
        spec.heads = true;
        heads = testing::HeadsOfKeys(testing::RandomSegmentKeys<int32_t>(n, rng, 200000));
        raw.assign(heads.begin(), heads.end());
      }
      const std::string what = std::string(engine::Name(spec.dtype)) + " " + std::string(engine::Name(op)) +
                               (spec.exclusive ? " exclusive" : " inclusive") + " kind " + std::to_string(kind) +
                               " n=" + std::to_string(n);
      const std::vector<T> want = RunSegmentedScan(cpu, spec, x, raw, {n});
      if constexpr (!testing::kRounds<T, O>) {
        testing::ExpectEqualValues(want, testing::SegmentedScanRef<T, O>(x, heads, spec.exclusive), what + " (cpu)");
      }
      for (const auto& chunks : {std::vector<std::size_t>{n}, testing::RandomChunkLengths(n, rng, sub)}) {
        const std::vector<T> got = RunSegmentedScan(gpu, spec, x, raw, chunks);
        ASSERT_TRUE(testing::SameBytes(got.data(), want.data(), n * sizeof(T))) << what << ", " << Describe(chunks);
      }
    }
  }
}

// Reduce by key: the CUDA engine's (the fused kernel for 4-byte values under exact operators;
// the runs of the segmented scan otherwise) gives the CPU engine's runs byte for byte, for
// sizes around the fused path's sub-chunk (2 MiB of values and keys), random chunkings, runs
// closing at chunk edges, 4- and 8-byte keys.
template <class T, class O, class K>
void ExpectGpuReduceByKey(Engine& gpu, CpuEngine& cpu, Op op, const std::string& algorithm, std::mt19937_64& rng) {
  const std::size_t sub = (kSubChunkBytes - 16) / (sizeof(T) + sizeof(K));
  engine::SegmentedScanSpec spec;
  spec.dtype = DTypeOf<T>();
  spec.op = op;
  spec.key_dtype = DTypeOf<K>();
  EXPECT_EQ(gpu.NewReduceByKey(spec)->algorithm(), algorithm);
  for (const std::size_t n : {std::size_t{1}, std::size_t{2049}, sub - 1, sub + 1, 2 * sub + 5}) {
    const std::vector<T> x = testing::RandomInput<T, O>(n, rng);
    for (const std::size_t mean_run : {std::size_t{2}, std::size_t{1000}}) {
      const auto keys = testing::RandomSegmentKeys<K>(n, rng, mean_run);
      const std::vector<unsigned char> raw(reinterpret_cast<const unsigned char*>(keys.data()),
                                           reinterpret_cast<const unsigned char*>(keys.data() + n));
      const auto want = RunReduceByKey(cpu, spec, x, raw, {n});
      const std::string what = std::string(engine::Name(spec.dtype)) + " " + std::string(engine::Name(op)) + " keys " +
                               std::string(engine::Name(spec.key_dtype)) + " n=" + std::to_string(n) + " run " +
                               std::to_string(mean_run);
      for (const auto& chunks : {std::vector<std::size_t>{n}, testing::RandomChunkLengths(n, rng, sub),
                                 testing::RandomChunkLengths(n, rng, 700)}) {
        const auto got = RunReduceByKey(gpu, spec, x, raw, chunks);
        ASSERT_EQ(got.first, want.first) << what << ", " << Describe(chunks) << ": keys";
        ASSERT_EQ(got.second, want.second) << what << ", " << Describe(chunks) << ": values";
      }
    }
  }
}

TEST_F(CudaEngineTest, ReduceByKeyMatchesTheCpuEngineByteForByte) {
  GPUSCAN_SEEDED_RNG(rng);
  CpuEngine cpu(0);
  ExpectGpuReduceByKey<int32_t, ops::Sum<int32_t>, int32_t>(*engine_, cpu, Op::kSum, "reduce_by_key_single_pass", rng);
  ExpectGpuReduceByKey<uint32_t, ops::BitXor<uint32_t>, uint64_t>(*engine_, cpu, Op::kBitXor,
                                                                  "reduce_by_key_single_pass", rng);
  ExpectGpuReduceByKey<float, ops::Max<float>, int64_t>(*engine_, cpu, Op::kMax, "reduce_by_key_single_pass", rng);
  ExpectGpuReduceByKey<int64_t, ops::Sum<int64_t>, int32_t>(*engine_, cpu, Op::kSum, "segmented_single_pass", rng);
  ExpectGpuReduceByKey<float, ops::Sum<float>, uint32_t>(*engine_, cpu, Op::kSum, "segmented_deterministic", rng);
}

template <class T>
void ExpectGpuSegmentedEveryOp(Engine& gpu, std::mt19937_64& rng) {
  CpuEngine cpu(0);
  ExpectGpuSegmented<T, ops::Sum<T>>(gpu, cpu, Op::kSum, rng);
  ExpectGpuSegmented<T, ops::Product<T>>(gpu, cpu, Op::kProduct, rng);
  ExpectGpuSegmented<T, ops::Min<T>>(gpu, cpu, Op::kMin, rng);
  ExpectGpuSegmented<T, ops::Max<T>>(gpu, cpu, Op::kMax, rng);
  if constexpr (std::is_integral_v<T>) {
    ExpectGpuSegmented<T, ops::BitAnd<T>>(gpu, cpu, Op::kBitAnd, rng);
    ExpectGpuSegmented<T, ops::BitOr<T>>(gpu, cpu, Op::kBitOr, rng);
    ExpectGpuSegmented<T, ops::BitXor<T>>(gpu, cpu, Op::kBitXor, rng);
  }
}

TEST_F(CudaEngineTest, SegmentedScanMatchesTheCpuEngineBitForBit) {
  GPUSCAN_SEEDED_RNG(rng);
  ExpectGpuSegmentedEveryOp<int32_t>(*engine_, rng);
  ExpectGpuSegmentedEveryOp<int64_t>(*engine_, rng);
  ExpectGpuSegmentedEveryOp<uint32_t>(*engine_, rng);
  ExpectGpuSegmentedEveryOp<uint64_t>(*engine_, rng);
  ExpectGpuSegmentedEveryOp<float>(*engine_, rng);
  ExpectGpuSegmentedEveryOp<double>(*engine_, rng);
  engine::SegmentedScanSpec spec;
  EXPECT_EQ(engine_->NewSegmentedScan(spec)->algorithm(), "segmented_single_pass");
  spec.dtype = DType::kFloat32;
  EXPECT_EQ(engine_->NewSegmentedScan(spec)->algorithm(), "segmented_deterministic");
  spec.dtype = DType::kFloat64;
  EXPECT_EQ(engine_->NewSegmentedScan(spec)->algorithm(), "segmented_deterministic_host");
}

// Sorts: the CUDA engine's radix sort gives the CPU engine's results exactly (keys' bits, the
// stable permutation, values moved along), ascending and descending, floats with NaN, infinities
// and signed zeros, many equal keys, sizes from 0 to a few million.
template <class T>
void ExpectGpuSorts(Engine& gpu, CpuEngine& cpu, std::mt19937_64& rng) {
  for (const std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{4097}, std::size_t{3000017}}) {
    std::vector<T> keys(n);
    for (T& k : keys) {
      if constexpr (std::is_floating_point_v<T>) {
        const T specials[] = {std::numeric_limits<T>::quiet_NaN(), -std::numeric_limits<T>::quiet_NaN(),
                              std::numeric_limits<T>::infinity(), -std::numeric_limits<T>::infinity(), T(0), -T(0)};
        k = rng() % 8 == 0 ? specials[rng() % 6] : T(int(rng() % 1000) - 500) / T(8);
      } else {
        k = rng() % 2 ? static_cast<T>(rng() % 1000) : testing::UniformInt<T>(rng);
      }
    }
    std::vector<uint32_t> values(n);
    for (auto& v : values) v = static_cast<uint32_t>(rng());
    for (const bool descending : {false, true}) {
      engine::SortSpec spec;
      spec.dtype = DTypeOf<T>();
      spec.descending = descending;
      spec.has_values = true;
      spec.values_dtype = DType::kUInt32;
      spec.want_indices = true;
      std::vector<T> k_cpu(n), k_gpu = Poisoned<T>(n);
      std::vector<uint32_t> v_cpu(n), v_gpu = Poisoned<uint32_t>(n);
      std::vector<int64_t> i_cpu(n), i_gpu = Poisoned<int64_t>(n);
      StageTimes times;
      cpu.Sort(spec, keys.data(), values.data(), n, k_cpu.data(), v_cpu.data(), i_cpu.data(), times);
      EXPECT_EQ(gpu.Sort(spec, keys.data(), values.data(), n, k_gpu.data(), v_gpu.data(), i_gpu.data(), times),
                "radix_sort");
      const std::string what = std::string(engine::Name(spec.dtype)) + (descending ? " descending" : " ascending") +
                               " n=" + std::to_string(n);
      ASSERT_TRUE(testing::SameBytes(k_gpu.data(), k_cpu.data(), n * sizeof(T))) << what << ": keys";
      EXPECT_EQ(i_gpu, i_cpu) << what << ": permutation";
      EXPECT_EQ(v_gpu, v_cpu) << what << ": values";
      // Keys alone (no permutation on the device).
      spec.has_values = false;
      spec.want_indices = false;
      std::vector<T> k_only = Poisoned<T>(n);
      gpu.Sort(spec, keys.data(), nullptr, n, k_only.data(), nullptr, nullptr, times);
      ASSERT_TRUE(testing::SameBytes(k_only.data(), k_cpu.data(), n * sizeof(T))) << what << ": keys only";
    }
  }
}

TEST_F(CudaEngineTest, SortMatchesTheCpuEngine) {
  GPUSCAN_SEEDED_RNG(rng);
  CpuEngine cpu(0);
  ExpectGpuSorts<int32_t>(*engine_, cpu, rng);
  ExpectGpuSorts<int64_t>(*engine_, cpu, rng);
  ExpectGpuSorts<uint32_t>(*engine_, cpu, rng);
  ExpectGpuSorts<uint64_t>(*engine_, cpu, rng);
  ExpectGpuSorts<float>(*engine_, cpu, rng);
  ExpectGpuSorts<double>(*engine_, cpu, rng);
}

// 2-D scans: the tile wavefront gives Scan2DRef's bits (the fixed row-then-column association)
// for every dtype and operator, on shapes around its bands (128 or 64 rows) and tiles (128
// columns), with the carry row crossing calls of random row counts. Widths that are whole
// 16-byte vectors (4, 128, 132, 1000) take the vector path, the others the element path.
template <class T, class O>
void ExpectGpuScan2D(Engine& gpu, Op op, std::mt19937_64& rng) {
  for (const std::size_t rows : {std::size_t{1}, std::size_t{127}, std::size_t{129}, std::size_t{300}}) {
    for (const std::size_t cols : {std::size_t{1}, std::size_t{4}, std::size_t{63}, std::size_t{65}, std::size_t{128},
                                   std::size_t{129}, std::size_t{132}, std::size_t{1000}}) {
      const std::vector<T> x = testing::RandomInput<T, O>(rows * cols, rng);
      const std::vector<T> ref = testing::Scan2DRef<T, O>(x, rows, cols);
      engine::Scan2DSpec spec;
      spec.dtype = DTypeOf<T>();
      spec.op = op;
      spec.cols = cols;
      for (const auto& chunks : {std::vector<std::size_t>{rows}, testing::RandomChunkLengths(rows, rng, 40)}) {
        const std::vector<T> got = RunScan2D(gpu, spec, x, chunks);
        ASSERT_TRUE(testing::SameBits(got, ref)) << engine::Name(spec.dtype) << " " << engine::Name(op) << " " << rows
                                                 << " x " << cols << " in " << chunks.size() << " calls";
      }
    }
  }
}

template <class T>
void ExpectGpuScan2DEveryOp(Engine& gpu, std::mt19937_64& rng) {
  ExpectGpuScan2D<T, ops::Sum<T>>(gpu, Op::kSum, rng);
  ExpectGpuScan2D<T, ops::Product<T>>(gpu, Op::kProduct, rng);
  ExpectGpuScan2D<T, ops::Min<T>>(gpu, Op::kMin, rng);
  ExpectGpuScan2D<T, ops::Max<T>>(gpu, Op::kMax, rng);
  if constexpr (std::is_integral_v<T>) {
    ExpectGpuScan2D<T, ops::BitAnd<T>>(gpu, Op::kBitAnd, rng);
    ExpectGpuScan2D<T, ops::BitOr<T>>(gpu, Op::kBitOr, rng);
    ExpectGpuScan2D<T, ops::BitXor<T>>(gpu, Op::kBitXor, rng);
  }
}

TEST_F(CudaEngineTest, Scan2DMatchesTheReferenceBitForBit) {
  GPUSCAN_SEEDED_RNG(rng);
  ExpectGpuScan2DEveryOp<int32_t>(*engine_, rng);
  ExpectGpuScan2DEveryOp<int64_t>(*engine_, rng);
  ExpectGpuScan2DEveryOp<uint32_t>(*engine_, rng);
  ExpectGpuScan2DEveryOp<uint64_t>(*engine_, rng);
  ExpectGpuScan2DEveryOp<float>(*engine_, rng);
  ExpectGpuScan2DEveryOp<double>(*engine_, rng);
  // Many bands at once (the wavefront's waits) and the CPU engine's bits on a larger table.
  const std::size_t rows = 4099, cols = 3001;
  const std::vector<float> x = testing::RandomInput<float, ops::Sum<float>>(rows * cols, rng);
  engine::Scan2DSpec spec;
  spec.dtype = DType::kFloat32;
  spec.cols = cols;
  CpuEngine cpu(0);
  const std::vector<float> on_cpu = RunScan2D(cpu, spec, x, {rows});
  EXPECT_TRUE(testing::SameBits(RunScan2D(*engine_, spec, x, {rows}), on_cpu));
  EXPECT_TRUE(testing::SameBits(RunScan2D(*engine_, spec, x, {1000, 3000, 99}), on_cpu));
  spec.cols = cols - 1;  // whole vectors: the 16-byte path
  const std::vector<float> x4(x.begin(), x.begin() + rows * spec.cols);
  EXPECT_TRUE(testing::SameBits(RunScan2D(*engine_, spec, x4, {777, 3322}), RunScan2D(cpu, spec, x4, {rows})));
  EXPECT_EQ(engine_->NewScan2D(spec)->algorithm(), "tile_wavefront");
}

}  // namespace
}  // namespace gpuscan::unit
