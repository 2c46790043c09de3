// Compaction: every dtype x predicate (and flags), values and/or indices, ours and CUB's,
// against a sequential loop; calls split over launches; a temp buffer shared by every function.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "gpu_test_util.h"
#include "gpuscan/kernels/compact.h"
#include "gpuscan/kernels/reduce.h"
#include "gpuscan/kernels/scan.h"
#include "gpuscan/kernels/testing.h"
#include "detail/tuning.cuh"

namespace gpuscan::gputest {
namespace {

using kernels::PredicateOp;

constexpr PredicateOp kAllPredicates[] = {PredicateOp::kNonzero, PredicateOp::kEq, PredicateOp::kNe,
                                          PredicateOp::kLt,      PredicateOp::kLe, PredicateOp::kGt,
                                          PredicateOp::kGe,      PredicateOp::kInRange,
                                          PredicateOp::kNotNan};

const char* PredName(PredicateOp p) {
  static const char* kNames[] = {"nonzero", "eq", "ne", "lt", "le", "gt", "ge", "in_range", "not_nan"};
  return kNames[static_cast<int>(p)];
}

// One compaction; flags == nullptr means predicate mode. want: 1 values, 2 indices, 3 both,
// 0 only the count.
template <class T>
void CheckCompact(bool use_cub, const std::vector<T>& x, const std::vector<uint8_t>* flags,
                  kernels::Predicate<T> pred, int want, int64_t index_base, TempBuffer& temp) {
  const uint64_t n = x.size();
  SCOPED_TRACE(std::string(use_cub ? "cub " : "own ") + DtypeName<T>() + " n=" + std::to_string(n) +
               (flags ? " flags" : std::string(" predicate ") + PredName(pred.op)) + " want=" +
               std::to_string(want) + " base=" + std::to_string(index_base));
  const testing::CompactResult<T> ref =
      flags ? testing::CompactRef(x, *flags, index_base)
            : testing::CompactRef(x, pred.op, pred.threshold, pred.upper, index_base);
  DeviceBuffer<T> d_in(n), d_vals(n);
  DeviceBuffer<uint8_t> d_flags(n);
  DeviceBuffer<int64_t> d_idx(n);
  DeviceBuffer<uint64_t> d_count(1);
  d_in.Upload(x);
  if (flags) d_flags.Upload(*flags);
  T* vals = (want & 1) ? d_vals.get() : nullptr;
  int64_t* idx = (want & 2) ? d_idx.get() : nullptr;
  const T* in = (flags && !(want & 1)) ? nullptr : d_in.get();  // flags mode needs no input
  const uint8_t* f = flags ? d_flags.get() : nullptr;
  std::size_t bytes = 0;
  CUDA_OK(kernels::Compact<T>(use_cub, nullptr, bytes, in, f, pred, n, index_base, vals, idx, d_count.get(), nullptr));
  void* tmp = temp.Reserve(bytes);
  CUDA_OK(kernels::Compact<T>(use_cub, tmp, bytes, in, f, pred, n, index_base, vals, idx, d_count.get(), nullptr));
  CUDA_OK(cudaDeviceSynchronize());
  const uint64_t kept = d_count.DownloadOne();
  ASSERT_EQ(kept, ref.indices.size());
  if (want & 1) {
    testing::ExpectEqualValues(d_vals.Download(kept), ref.values, "kept values");
    // Nothing written past the kept ones.
    const std::vector<T> rest = d_vals.Download(n - kept, kept);
    std::vector<unsigned char> bytes_rest(rest.size() * sizeof(T));
    if (!rest.empty()) std::memcpy(bytes_rest.data(), rest.data(), bytes_rest.size());
    EXPECT_EQ(std::count(bytes_rest.begin(), bytes_rest.end(), 0xFF), static_cast<long>(bytes_rest.size()))
        << "values written past the kept count";
  }
  if (want & 2) {
    EXPECT_EQ(d_idx.Download(kept), ref.indices);
  }
  EXPECT_TRUE(d_vals.GuardIntact() && d_idx.GuardIntact());
}

// The tiles of the two compaction kernels (values only; with indices), which the sizes sweep.
template <class T>
constexpr uint64_t kValuesTile = kernels::detail::CompactTuning<kernels::detail::kTunedArch, sizeof(T)>::kTile;
template <class T>
constexpr uint64_t kIndexTile = kernels::detail::CompactIndexTuning<kernels::detail::kTunedArch, sizeof(T)>::kTile;

template <class T>
kernels::Predicate<T> RandomPredicate(PredicateOp op, std::mt19937_64& rng) {
  kernels::Predicate<T> p;
  p.op = op;
  p.threshold = T(int(rng() % 9) - (std::is_signed_v<T> ? 4 : 0));
  p.upper = T(p.threshold + T(5));
  return p;
}

class CompactTest : public GpuTest, public ::testing::WithParamInterface<bool> {
 protected:
  template <class T>
  void SweepDtype() {
    GPUSCAN_SEEDED_RNG(rng);
    TempBuffer temp;
    const bool use_cub = GetParam();
    int k = 0;
    constexpr uint64_t tv = kValuesTile<T>, ti = kIndexTile<T>;
    for (uint64_t n : {uint64_t{0}, uint64_t{1}, uint64_t{31}, uint64_t{32}, uint64_t{33}, ti - 1, ti, ti + 1, ti / 2 - 1,
                       ti / 2 + 1, 3 * ti + 1, 40 * ti + 3, tv - 1, tv, tv + 1, 3 * tv + 1}) {
      const std::vector<T> x = testing::RandomCompactInput<T>(n, rng, std::is_floating_point_v<T> ? 0.05 : 0.0);
      for (PredicateOp op : kAllPredicates) {
        CheckCompact<T>(use_cub, x, nullptr, RandomPredicate<T>(op, rng), 1 + (k++ % 3), int64_t(k) * 1000 - 7, temp);
        if (HasFatalFailure()) return;
      }
      for (double p_keep : {0.0, 0.3, 1.0}) {
        const std::vector<uint8_t> flags = testing::RandomFlags(n, rng, p_keep);
        for (int want : {0, 1, 2, 3}) {
          CheckCompact<T>(use_cub, x, &flags, {}, want, 1ll << 40, temp);
          if (HasFatalFailure()) return;
        }
      }
    }
    // Large, both modes.
    const uint64_t n = (1ull << 24) + 7;
    const std::vector<T> x = testing::RandomCompactInput<T>(n, rng);
    CheckCompact<T>(use_cub, x, nullptr, RandomPredicate<T>(PredicateOp::kGt, rng), 3, 0, temp);
    const std::vector<uint8_t> flags = testing::RandomFlags(n, rng, 0.5);
    CheckCompact<T>(use_cub, x, &flags, {}, 3, 5, temp);
  }
};

TEST_P(CompactTest, Int32) { SweepDtype<int32_t>(); }
TEST_P(CompactTest, Int64) { SweepDtype<int64_t>(); }
TEST_P(CompactTest, Uint32) { SweepDtype<uint32_t>(); }
TEST_P(CompactTest, Uint64) { SweepDtype<uint64_t>(); }
TEST_P(CompactTest, Float) { SweepDtype<float>(); }
TEST_P(CompactTest, Double) { SweepDtype<double>(); }

INSTANTIATE_TEST_SUITE_P(Impl, CompactTest, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return std::string(info.param ? "cub" : "own");
                         });

TEST_F(GpuTest, CompactSplitOverLaunches) {
  GPUSCAN_SEEDED_RNG(rng);
  TempBuffer temp;
  for (uint32_t cap : {1u, 3u}) {
    kernels::testing_hooks::SetMaxTilesPerLaunch(cap);
    const std::vector<float> x = testing::RandomCompactInput<float>(20 * 4096 + 11, rng, 0.1);
    CheckCompact<float>(false, x, nullptr, {PredicateOp::kNotNan, 0.f, 0.f}, 3, 100, temp);
    const std::vector<uint8_t> flags = testing::RandomFlags(x.size(), rng, 0.4);
    CheckCompact<float>(false, x, &flags, {}, 3, 0, temp);
    // Values only: the slim-gather kernel and its own tiles.
    const std::vector<float> y = testing::RandomCompactInput<float>(5 * kValuesTile<float> + 11, rng, 0.1);
    const std::vector<uint8_t> yflags = testing::RandomFlags(y.size(), rng, 0.6);
    CheckCompact<float>(false, y, &yflags, {}, 1, 0, temp);
    CheckCompact<float>(false, y, nullptr, {PredicateOp::kNotNan, 0.f, 0.f}, 1, 0, temp);
  }
  kernels::testing_hooks::SetMaxTilesPerLaunch(0);
}

// One temp buffer, cleared once, serving a long mix of calls of every kind and size in one
// stream with no synchronization in between: the epochs and the zero-after-use rule must keep
// every call independent of the ones before it.
TEST_F(GpuTest, OneTempBufferServesEveryFunction) {
  GPUSCAN_SEEDED_RNG(rng);
  const uint64_t n_big = 200000;
  using kernels::ScanAlgorithm;
  // Size the buffer for the largest of all calls below.
  std::size_t need = 0, b = 0;
  DeviceBuffer<int32_t> i_in(n_big), i_out(n_big), i_red(1);
  DeviceBuffer<double> d_in(n_big), d_out(n_big);
  DeviceBuffer<uint64_t> count(1);
  DeviceBuffer<int64_t> idx(n_big);
  const ScanAlgorithm algos[] = {ScanAlgorithm::kDecoupledLookback, ScanAlgorithm::kCub, ScanAlgorithm::kChained,
                                 ScanAlgorithm::kBlelloch, ScanAlgorithm::kReduceThenScan};
  for (ScanAlgorithm a : algos) {
    kernels::Scan<int32_t, ops::Sum<int32_t>>(a, nullptr, b, nullptr, nullptr, n_big, false, nullptr, nullptr, nullptr);
    need = std::max(need, b);
    kernels::Scan<double, ops::Max<double>>(a, nullptr, b, nullptr, nullptr, n_big, true, nullptr, nullptr, nullptr);
    need = std::max(need, b);
  }
  for (bool cub : {false, true}) {
    kernels::Reduce<int32_t, ops::Sum<int32_t>>(cub, nullptr, b, nullptr, n_big, nullptr, nullptr, nullptr);
    need = std::max(need, b);
    kernels::Compact<double>(cub, nullptr, b, nullptr, nullptr, {PredicateOp::kGt, 0.0, 0.0}, n_big, 0, nullptr,
                             nullptr, nullptr, nullptr);
    need = std::max(need, b);
  }
  TempBuffer temp;
  void* tmp = temp.Reserve(need);
  for (int round = 0; round < 40; ++round) {
    const uint64_t n = 1 + rng() % n_big;
    const ScanAlgorithm a = algos[rng() % 5];
    const std::vector<int32_t> xi = testing::RandomInput<int32_t, ops::Sum<int32_t>>(n, rng);
    const std::vector<double> xd = testing::RandomInput<double, ops::Max<double>>(n, rng);
    i_in.Upload(xi);
    d_in.Upload(xd);
    const bool cub = rng() & 1;
    CUDA_OK((kernels::Scan<int32_t, ops::Sum<int32_t>>(a, tmp, need, i_in.get(), i_out.get(), n, false, nullptr, nullptr, nullptr)));
    CUDA_OK((kernels::Reduce<int32_t, ops::Sum<int32_t>>(cub, tmp, need, i_in.get(), n, nullptr, i_red.get(), nullptr)));
    CUDA_OK((kernels::Scan<double, ops::Max<double>>(a, tmp, need, d_in.get(), d_out.get(), n, true, nullptr, nullptr, nullptr)));
    CUDA_OK(kernels::Compact<double>(cub, tmp, need, d_in.get(), nullptr, {PredicateOp::kGt, 0.0, 0.0}, n, 0, nullptr,
                                     idx.get(), count.get(), nullptr));
    CUDA_OK(cudaDeviceSynchronize());
    SCOPED_TRACE("round " + std::to_string(round) + " " + kernels::ScanAlgorithmName(a) + " n=" + std::to_string(n));
    testing::ExpectEqualValues(i_out.Download(n), testing::ScanRef<int32_t, ops::Sum<int32_t>>(xi, false), "int32 scan");
    EXPECT_EQ(i_red.DownloadOne(), (testing::ReduceRef<int32_t, ops::Sum<int32_t>>(xi)));
    testing::ExpectEqualValues(d_out.Download(n), testing::ScanRef<double, ops::Max<double>>(xd, true), "double scan");
    const auto ref = testing::CompactRef(xd, PredicateOp::kGt, 0.0, 0.0);
    ASSERT_EQ(count.DownloadOne(), ref.indices.size());
    EXPECT_EQ(idx.Download(ref.indices.size()), ref.indices);
    if (HasFailure()) return;
  }
}

}  // namespace
}  // namespace gpuscan::gputest
