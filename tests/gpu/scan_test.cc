// Scans: every algorithm x dtype x operator x inclusive/exclusive over the sizes where tiling
// goes wrong, with and without a carry, against a sequential loop; chaining through a device
// carry; in place; unaligned pointers; calls split over several launches; long arrays.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "detail/tuning.cuh"
#include "gpu_test_util.h"
#include "gpuscan/kernels/scan.h"
#include "gpuscan/kernels/testing.h"

namespace gpuscan::gputest {
namespace {

using kernels::ScanAlgorithm;
using testing::RandomInput;

constexpr ScanAlgorithm kAllAlgorithms[] = {
    ScanAlgorithm::kDecoupledLookback, ScanAlgorithm::kChained,   ScanAlgorithm::kReduceThenScan,
    ScanAlgorithm::kKoggeStone,        ScanAlgorithm::kBrentKung, ScanAlgorithm::kBlelloch,
    ScanAlgorithm::kHillisSteele,      ScanAlgorithm::kCub};

// The look-back scan's tiles (in shared memory, BulkScanTuning: Tiny up to kTinyUpTo elements,
// Small below kLargeFrom, Large from there, or Wide on a GPU of more bandwidth than an H100's),
// and the register kernel's that the chained scan runs (ScanTuning).
template <class T>
using BulkTuning = kernels::detail::BulkScanTuning<kernels::detail::kTunedArch, sizeof(T)>;
template <class T>
constexpr uint64_t Tile() {
  return BulkTuning<T>::Small::kTile;
}
template <class T>
constexpr uint64_t RegisterTile() {
  return kernels::detail::ScanTuning<kernels::detail::kTunedArch, sizeof(T)>::kTile;
}

// The sizes where tiling goes wrong: empty, tiny, around a warp, around one tile (of either
// kernel, and of the look-back scan's small calls), a few tiles, more than 32 tiles (the
// look-back's window moves on), either side of the small calls' policy (kTinyUpTo) and of the
// look-back scan's last launch that takes tiles by block index (kIndexedTilesMax).
template <class T>
std::vector<uint64_t> EdgeSizes() {
  const uint64_t t = Tile<T>(), r = RegisterTile<T>(), x = kernels::detail::kIndexedTilesMax;
  const uint64_t u = BulkTuning<T>::Tiny::kTile, tiny = BulkTuning<T>::kTinyUpTo;
  std::vector<uint64_t> sizes = {0, 1, 31, 32, 33, t - 1, t, t + 1, 3 * t - 1, 3 * t + 1, 33 * t + 7, x * t, x * t + 1};
  if (u != t) sizes.insert(sizes.end(), {u - 1, u + 1, 3 * u + 1, tiny, tiny + 1});
  if (r != t) sizes.insert(sizes.end(), {r - 1, r + 1, 33 * r + 7});
  return sizes;
}

// What a scan of x with carry c must give: v = [c] + x scanned inclusively; an inclusive
// result is v'[1..n], an exclusive one v'[0..n-1], the carry out v'[n].
template <class T, class Op>
struct Expected {
  std::vector<T> v;      // [c] + x
  std::vector<T> vscan;  // inclusive scan of v
};

template <class T, class Op>
Expected<T, Op> Expect(const std::vector<T>& x, T carry) {
  Expected<T, Op> e;
  e.v.reserve(x.size() + 1);
  e.v.push_back(carry);
  e.v.insert(e.v.end(), x.begin(), x.end());
  e.vscan = testing::ScanRef<T, Op>(e.v, false);
  return e;
}

// Checks out (n elements) and carry_out against the expectation, with the float tolerance
// of reference.h measured over v.
template <class T, class Op>
void CheckAgainst(const Expected<T, Op>& e, const std::vector<T>& out, T carry_out, bool exclusive) {
  const std::size_t n = out.size();
  std::vector<T> got_ext;
  got_ext.reserve(n + 1);
  if (exclusive) {
    got_ext = out;
    got_ext.push_back(carry_out);
  } else {
    got_ext.push_back(e.v[0]);
    got_ext.insert(got_ext.end(), out.begin(), out.end());
  }
  testing::ExpectScanNear<T, Op>(got_ext, e.vscan, e.v, false, exclusive ? "exclusive scan (+ carry out)" : "inclusive scan");
  if (!exclusive) {
    double abs_sum = 0;
    for (const T& y : e.v) abs_sum += std::fabs(double(y));
    EXPECT_TRUE((testing::WithinTolerance<T, Op>(carry_out, e.vscan[n], abs_sum, double(n + 1))))
        << "carry out " << testing::Show(carry_out) << ", expected " << testing::Show(e.vscan[n]);
  }
}

template <class T, class Op>
std::string Label(ScanAlgorithm algo, uint64_t n, bool exclusive, bool carry) {
  return std::string(kernels::ScanAlgorithmName(algo)) + " " + DtypeName<T>() + " " + Op::kName +
         (exclusive ? " exclusive" : " inclusive") + " n=" + std::to_string(n) +
         (carry ? " with carry" : " no carry");
}

// One scan of fresh random input into a poisoned output.
template <class T, class Op>
void CheckScan(ScanAlgorithm algo, uint64_t n, bool exclusive, bool with_carry, std::mt19937_64& rng,
               TempBuffer& temp) {
  SCOPED_TRACE((Label<T, Op>(algo, n, exclusive, with_carry)));
  const std::vector<T> x = RandomInput<T, Op>(n, rng);
  const T carry = with_carry ? RandomInput<T, Op>(1, rng)[0] : Op::identity();
  DeviceBuffer<T> d_in(n), d_out(n), d_carry(1), d_carry_out(1);
  ASSERT_TRUE(d_in.ok() && d_out.ok() && d_carry.ok() && d_carry_out.ok());
  d_in.Upload(x);
  d_carry.Upload({carry});
  const T* cin = with_carry ? d_carry.get() : nullptr;
  std::size_t bytes = 0;
  CUDA_OK((kernels::Scan<T, Op>(algo, nullptr, bytes, d_in.get(), d_out.get(), n, exclusive, cin,
                                d_carry_out.get(), nullptr)));
  void* tmp = temp.Reserve(bytes);
  ASSERT_NE(tmp, nullptr);
  CUDA_OK((kernels::Scan<T, Op>(algo, tmp, bytes, d_in.get(), d_out.get(), n, exclusive, cin,
                                d_carry_out.get(), nullptr)));
  CUDA_OK(cudaDeviceSynchronize());
  CheckAgainst<T, Op>(Expect<T, Op>(x, carry), d_out.Download(n), d_carry_out.DownloadOne(), exclusive);
  EXPECT_TRUE(d_out.GuardIntact()) << "wrote past the end of the output";
  EXPECT_EQ(d_in.Download(n), x) << "the input changed";
}

class ScanTest : public GpuTest, public ::testing::WithParamInterface<ScanAlgorithm> {
 protected:
  template <class T>
  void SweepDtype() {
    GPUSCAN_SEEDED_RNG(rng);
    TempBuffer temp;
    ForEachOp<T>([&](auto op) {
      using Op = decltype(op);
      int k = 0;
      for (uint64_t n : EdgeSizes<T>()) {
        for (bool exclusive : {false, true}) {
          CheckScan<T, Op>(GetParam(), n, exclusive, (k++ % 3) != 0, rng, temp);
          if (HasFatalFailure()) return;
        }
      }
    });
  }
};

TEST_P(ScanTest, Int32) { SweepDtype<int32_t>(); }
TEST_P(ScanTest, Int64) { SweepDtype<int64_t>(); }
TEST_P(ScanTest, Uint32) { SweepDtype<uint32_t>(); }
TEST_P(ScanTest, Uint64) { SweepDtype<uint64_t>(); }
TEST_P(ScanTest, Float) { SweepDtype<float>(); }
TEST_P(ScanTest, Double) { SweepDtype<double>(); }

// One array scanned as many calls of random lengths (empty ones too), the carry staying on
// the device in one slot that is both carry in and carry out, equals one scan.
TEST_P(ScanTest, ChainedCallsMatchOneScan) {
  GPUSCAN_SEEDED_RNG(rng);
  TempBuffer temp;
  ForEachDtype([&](auto t) {
    using T = decltype(t);
    ForEachOp<T>([&](auto op) {
      using Op = decltype(op);
      for (bool exclusive : {false, true}) {
        const uint64_t n = 5 * Tile<T>() + 77;
        SCOPED_TRACE((Label<T, Op>(GetParam(), n, exclusive, true) + " chained over calls"));
        const std::vector<T> x = RandomInput<T, Op>(n, rng);
        const T carry = RandomInput<T, Op>(1, rng)[0];
        DeviceBuffer<T> d_in(n), d_out(n), d_carry(1);
        d_in.Upload(x);
        d_carry.Upload({carry});
        std::size_t bytes = 0;
        CUDA_OK((kernels::Scan<T, Op>(GetParam(), nullptr, bytes, d_in.get(), d_out.get(), n, exclusive,
                                      d_carry.get(), d_carry.get(), nullptr)));
        void* tmp = temp.Reserve(bytes);
        uint64_t off = 0;
        for (std::size_t len : testing::RandomChunkLengths(n, rng, Tile<T>())) {
          CUDA_OK((kernels::Scan<T, Op>(GetParam(), tmp, bytes, d_in.get() + off, d_out.get() + off, len,
                                        exclusive, d_carry.get(), d_carry.get(), nullptr)));
          off += len;
        }
        CUDA_OK(cudaDeviceSynchronize());
        CheckAgainst<T, Op>(Expect<T, Op>(x, carry), d_out.Download(n), d_carry.DownloadOne(), exclusive);
        if (HasFatalFailure()) return;
      }
    });
  });
}

// In place (out == in), and at addresses that are not 16-byte aligned (scalar loads).
TEST_P(ScanTest, InPlaceAndUnaligned) {
  GPUSCAN_SEEDED_RNG(rng);
  TempBuffer temp;
  auto run = [&](auto t, auto op) {
    using T = decltype(t);
    using Op = decltype(op);
    for (bool exclusive : {false, true}) {
      for (int shift : {0, 1}) {
        for (bool in_place : {true, false}) {
          const uint64_t n = 7 * Tile<T>() + 5;
          SCOPED_TRACE((Label<T, Op>(GetParam(), n, exclusive, true) + (in_place ? " in place" : "") +
                        " shifted by " + std::to_string(shift)));
          const std::vector<T> x = RandomInput<T, Op>(n, rng);
          const T carry = RandomInput<T, Op>(1, rng)[0];
          DeviceBuffer<T> d_a(n + 1), d_b(n + 1), d_carry(1), d_carry_out(1);
          d_a.Upload(x, shift);
          d_carry.Upload({carry});
          T* in = d_a.get() + shift;
          T* out = in_place ? in : d_b.get() + (1 - shift);
          std::size_t bytes = 0;
          CUDA_OK((kernels::Scan<T, Op>(GetParam(), nullptr, bytes, in, out, n, exclusive, d_carry.get(),
                                        d_carry_out.get(), nullptr)));
          void* tmp = temp.Reserve(bytes);
          CUDA_OK((kernels::Scan<T, Op>(GetParam(), tmp, bytes, in, out, n, exclusive, d_carry.get(),
                                        d_carry_out.get(), nullptr)));
          CUDA_OK(cudaDeviceSynchronize());
          std::vector<T> got(n);
          CUDA_OK(cudaMemcpy(got.data(), out, n * sizeof(T), cudaMemcpyDeviceToHost));
          CheckAgainst<T, Op>(Expect<T, Op>(x, carry), got, d_carry_out.DownloadOne(), exclusive);
          if (HasFatalFailure()) return;
        }
      }
    }
  };
  run(int32_t{}, ops::Sum<int32_t>{});
  run(float{}, ops::Max<float>{});
  run(uint64_t{}, ops::BitXor<uint64_t>{});
  run(double{}, ops::Sum<double>{});
}

// Long arrays: 2^24 + 7 for every dtype (sum and max), and a length where the reduce-then-scan
// blocks walk several tiles each.
TEST_P(ScanTest, Large) {
  GPUSCAN_SEEDED_RNG(rng);
  TempBuffer temp;
  const ScanAlgorithm algo = GetParam();
  const bool fast = algo == ScanAlgorithm::kDecoupledLookback || algo == ScanAlgorithm::kCub;
  if (fast) {
    ForEachDtype([&](auto t) {
      using T = decltype(t);
      CheckScan<T, ops::Sum<T>>(algo, (1u << 24) + 7, false, true, rng, temp);
      CheckScan<T, ops::Max<T>>(algo, (1u << 24) + 7, true, true, rng, temp);
    });
  }
  // > kMaxBlocks tiles: every reduce-then-scan block walks 2 or more tiles.
  CheckScan<int32_t, ops::Sum<int32_t>>(algo, 2500 * Tile<int32_t>() + 3, true, true, rng, temp);
  CheckScan<double, ops::Min<double>>(algo, 2100 * Tile<double>() + 1, false, true, rng, temp);
}

// The look-back scan changes tile size at BulkScanTuning::kLargeFrom elements: both sides of it,
// from one temp buffer asked for the largest call (the engine asks once per lane), and a call
// whose last tile is partial.
template <class T>
void CheckAcrossTileSizeThreshold(ScanAlgorithm algo, std::vector<uint64_t> below) {
  using Tn = BulkTuning<T>;
  static_assert(Tn::kLargeFrom < (1ull << 28), "the test allocates kLargeFrom elements");
  GPUSCAN_SEEDED_RNG(rng);
  using Op = ops::Sum<T>;
  const uint64_t big = Tn::kLargeFrom + 2 * Tn::Large::kTile + 3;
  const std::vector<T> x = RandomInput<T, Op>(big, rng);
  DeviceBuffer<T> d_in(big), d_out(big), d_carry(1), d_carry_out(1);
  ASSERT_TRUE(d_in.ok() && d_out.ok() && d_carry.ok() && d_carry_out.ok());
  d_in.Upload(x);
  const T carry = RandomInput<T, Op>(1, rng)[0];
  d_carry.Upload({carry});
  std::size_t bytes = 0;
  CUDA_OK((kernels::Scan<T, Op>(algo, nullptr, bytes, d_in.get(), d_out.get(), big, false, nullptr, nullptr, nullptr)));
  TempBuffer temp;
  void* tmp = temp.Reserve(bytes);
  ASSERT_NE(tmp, nullptr);
  below.insert(below.begin(), big);
  for (const uint64_t n : below) {
    for (bool exclusive : {false, true}) {
      SCOPED_TRACE((Label<T, Op>(algo, n, exclusive, true)));
      const std::vector<T> xn(x.begin(), x.begin() + n);
      CUDA_OK((kernels::Scan<T, Op>(algo, tmp, bytes, d_in.get(), d_out.get(), n, exclusive, d_carry.get(),
                                    d_carry_out.get(), nullptr)));
      CUDA_OK(cudaDeviceSynchronize());
      CheckAgainst<T, Op>(Expect<T, Op>(xn, carry), d_out.Download(n), d_carry_out.DownloadOne(), exclusive);
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
}

TEST_P(ScanTest, LookBackAcrossItsTileSizeThreshold) {
  if (GetParam() != ScanAlgorithm::kDecoupledLookback) GTEST_SKIP() << "the look-back scan's tiles";
  const uint64_t at = BulkTuning<int32_t>::kLargeFrom, small = BulkTuning<int32_t>::Small::kTile;
  CheckAcrossTileSizeThreshold<int32_t>(GetParam(), {at, at - 1, at - small + 5});
  if (HasFatalFailure()) return;
  CheckAcrossTileSizeThreshold<double>(GetParam(), {BulkTuning<double>::kLargeFrom - 1});
}

// The single-pass kernels split a call into launches of at most N tiles (N is 2^22 normally);
// with N lowered the seams between launches get tested too.
TEST_P(ScanTest, SplitOverLaunches) {
  const ScanAlgorithm algo = GetParam();
  if (algo != ScanAlgorithm::kDecoupledLookback && algo != ScanAlgorithm::kChained) {
    GTEST_SKIP() << "only the single-pass algorithms split calls into launches";
  }
  GPUSCAN_SEEDED_RNG(rng);
  TempBuffer temp;
  for (uint32_t cap : {1u, 3u, 40u}) {
    kernels::testing_hooks::SetMaxTilesPerLaunch(cap);
    for (bool exclusive : {false, true}) {
      CheckScan<int32_t, ops::Sum<int32_t>>(algo, 100 * Tile<int32_t>() + 9, exclusive, true, rng, temp);
      CheckScan<double, ops::Sum<double>>(algo, 41 * Tile<double>(), exclusive, false, rng, temp);
    }
  }
  kernels::testing_hooks::SetMaxTilesPerLaunch(0);
}

TEST_P(ScanTest, RejectsTooSmallTempAndNullPointers) {
  DeviceBuffer<int32_t> d(1000);
  std::size_t bytes = 0;
  using Op = ops::Sum<int32_t>;
  ASSERT_EQ((kernels::Scan<int32_t, Op>(GetParam(), nullptr, bytes, d.get(), d.get(), 1000, false, nullptr,
                                        nullptr, nullptr)),
            cudaSuccess);
  ASSERT_GT(bytes, 0u);
  TempBuffer temp;
  void* tmp = temp.Reserve(bytes);
  std::size_t small = 16;
  EXPECT_EQ((kernels::Scan<int32_t, Op>(GetParam(), tmp, small, d.get(), d.get(), 1000, false, nullptr,
                                        nullptr, nullptr)),
            cudaErrorInvalidValue);
  EXPECT_EQ((kernels::Scan<int32_t, Op>(GetParam(), tmp, bytes, nullptr, d.get(), 1000, false, nullptr,
                                        nullptr, nullptr)),
            cudaErrorInvalidValue);
}

INSTANTIATE_TEST_SUITE_P(Algorithms, ScanTest, ::testing::ValuesIn(kAllAlgorithms),
                         [](const ::testing::TestParamInfo<ScanAlgorithm>& info) {
                           return std::string(kernels::ScanAlgorithmName(info.param));
                         });

}  // namespace
}  // namespace gpuscan::gputest
