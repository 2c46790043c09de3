// The fused segmented scan (kernels::SegmentedScan): every kind of key (4- and 8-byte keys, head
// bytes), inclusive and exclusive, over the sizes where tiling goes wrong, in one call or split
// over calls chained through the device carry (keys that change exactly at a split or do not),
// calls split over several launches, unaligned pointers, one segment over everything and
// segments of one element; bit for bit against a sequential loop.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "detail/tuning.cuh"
#include "gpu_test_util.h"
#include "gpuscan/kernels/segmented_scan.h"
#include "gpuscan/kernels/testing.h"

namespace gpuscan::gputest {
namespace {

template <class T, class K>
constexpr uint64_t Tile() {
  return kernels::detail::SegmentedTuning<kernels::detail::kTunedArch, sizeof(T), sizeof(K)>::kTile;
}

enum class Keys { kRandom, kOneSegment, kAllHeads };

// Keys of K for n elements (K = uint8_t: head bytes made from random keys).
template <class K>
std::vector<K> MakeKeys(std::size_t n, Keys kind, std::size_t mean_run, std::mt19937_64& rng) {
  std::vector<uint64_t> keys;
  switch (kind) {
    case Keys::kRandom: keys = testing::RandomSegmentKeys<uint64_t>(n, rng, mean_run); break;
    case Keys::kOneSegment: keys.assign(n, 7); break;
    case Keys::kAllHeads:
      for (std::size_t i = 0; i < n; ++i) keys.push_back(i);
      break;
  }
  std::vector<K> out(n);
  if constexpr (std::is_same_v<K, uint8_t>) {
    const auto heads = testing::HeadsOfKeys(keys);
    for (std::size_t i = 0; i < n; ++i) out[i] = heads[i] ? uint8_t(1 + rng() % 255) : 0;  // any nonzero byte
  } else {
    for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<K>(keys[i]);
  }
  return out;
}

template <class K>
std::vector<uint8_t> HeadsOf(const std::vector<K>& keys) {
  if constexpr (std::is_same_v<K, uint8_t>) {
    std::vector<uint8_t> h(keys.size());
    for (std::size_t i = 0; i < keys.size(); ++i) h[i] = keys[i] != 0;
    return h;
  } else {
    return testing::HeadsOfKeys(keys);
  }
}

// Scans x under keys as calls of the given lengths (a carry chains them; `offset` elements of
// slack before the data make the pointers unaligned), and checks every bit.
template <class T, class Op, class K>
void CheckSegmented(const std::vector<T>& x, const std::vector<K>& keys, const std::vector<std::size_t>& calls,
                    bool exclusive, std::size_t offset, const std::string& what) {
  const std::size_t n = x.size();
  DeviceBuffer<T> d_x(n + offset), d_out(n + offset);
  DeviceBuffer<K> d_k(n + offset);
  DeviceBuffer<kernels::SegmentCarry<T>> d_carry(1);
  ASSERT_TRUE(d_x.ok() && d_out.ok() && d_k.ok() && d_carry.ok());
  d_x.Upload(x, offset);
  d_k.Upload(keys, offset);
  std::size_t temp_bytes = 0;
  ASSERT_EQ((kernels::SegmentedScan<T, Op, K>(nullptr, temp_bytes, nullptr, nullptr, nullptr, n, exclusive, nullptr,
                                              nullptr, nullptr)),
            cudaSuccess);
  TempBuffer temp;
  void* tmp = temp.Reserve(temp_bytes);
  std::size_t done = 0;
  bool first = true;
  for (const std::size_t len : calls) {
    std::size_t b = temp_bytes;
    CUDA_OK((kernels::SegmentedScan<T, Op, K>(tmp, b, d_x.get() + offset + done, d_k.get() + offset + done,
                                              d_out.get() + offset + done, len, exclusive,
                                              first ? nullptr : d_carry.get(), d_carry.get(), nullptr)));
    first = false;
    done += len;
  }
  CUDA_OK(cudaDeviceSynchronize());
  const std::vector<T> got = d_out.Download(n, offset);
  const std::vector<T> want = testing::SegmentedScanRef<T, Op>(x, HeadsOf(keys), exclusive);
  ASSERT_TRUE(testing::SameBytes(got.data(), want.data(), n * sizeof(T))) << what;
  EXPECT_TRUE(d_out.GuardIntact()) << what << ": wrote past the end";
}

template <class T, class Op, class K>
void SweepSizes(std::mt19937_64& rng) {
  const uint64_t t = Tile<T, K>();
  for (const uint64_t n : {uint64_t{1}, uint64_t{31}, uint64_t{33}, t - 1, t, t + 1, 3 * t + 1, 33 * t + 7}) {
    const auto x = testing::RandomInput<T, Op>(n, rng);
    for (const Keys kind : {Keys::kRandom, Keys::kOneSegment, Keys::kAllHeads}) {
      for (const std::size_t mean_run : {std::size_t{3}, std::size_t{700}}) {
        if (kind != Keys::kRandom && mean_run != 3) continue;
        const auto keys = MakeKeys<K>(n, kind, mean_run, rng);
        for (const bool exclusive : {false, true}) {
          const std::string what = "n=" + std::to_string(n) + " kind " + std::to_string(int(kind)) + " run " +
                                   std::to_string(mean_run) + (exclusive ? " exclusive" : " inclusive");
          CheckSegmented<T, Op, K>(x, keys, {n}, exclusive, 0, what);
          // Split at a random point and at a tile, with an empty call between: the carry's key
          // decides whether the next call's first element opens a segment.
          const std::size_t cut = rng() % (n + 1);
          CheckSegmented<T, Op, K>(x, keys, {cut, 0, n - cut}, exclusive, 0, what + " cut " + std::to_string(cut));
          if (n > t) CheckSegmented<T, Op, K>(x, keys, {t, n - t}, exclusive, 1, what + " cut at a tile, unaligned");
        }
      }
    }
  }
}

template <class T, class Op>
void SweepKeyKinds(std::mt19937_64& rng) {
  SweepSizes<T, Op, uint32_t>(rng);
  SweepSizes<T, Op, uint64_t>(rng);
  SweepSizes<T, Op, uint8_t>(rng);
}

class SegmentedScanTest : public GpuTest {};

TEST_F(SegmentedScanTest, MatchesTheSequentialLoopForEveryKeyKind) {
  GPUSCAN_SEEDED_RNG(rng);
  SweepKeyKinds<int32_t, ops::Sum<int32_t>>(rng);
  SweepKeyKinds<uint32_t, ops::BitXor<uint32_t>>(rng);
  SweepKeyKinds<int64_t, ops::Max<int64_t>>(rng);
  SweepKeyKinds<uint64_t, ops::Sum<uint64_t>>(rng);
  SweepKeyKinds<float, ops::Min<float>>(rng);
  SweepKeyKinds<double, ops::Max<double>>(rng);
}

TEST_F(SegmentedScanTest, CallsSplitOverSeveralLaunchesChainTheirCarries) {
  GPUSCAN_SEEDED_RNG(rng);
  for (uint32_t cap : {1u, 3u}) {
    kernels::testing_hooks::SetMaxTilesPerLaunch(cap);
    for (const bool exclusive : {false, true}) {
      const std::size_t n = 20 * Tile<int32_t, uint32_t>() + 5;
      const auto x = testing::RandomInput<int32_t, ops::Sum<int32_t>>(n, rng);
      CheckSegmented<int32_t, ops::Sum<int32_t>, uint32_t>(x, MakeKeys<uint32_t>(n, Keys::kRandom, 900, rng), {n},
                                                            exclusive, 0, "int32 keys, cap " + std::to_string(cap));
      const std::size_t m = 9 * Tile<double, uint8_t>() + 1;
      const auto y = testing::RandomInput<double, ops::Max<double>>(m, rng);
      CheckSegmented<double, ops::Max<double>, uint8_t>(y, MakeKeys<uint8_t>(m, Keys::kRandom, 300, rng), {m / 2, m - m / 2},
                                                        exclusive, 0, "double heads, cap " + std::to_string(cap));
    }
  }
  kernels::testing_hooks::SetMaxTilesPerLaunch(0);
}

TEST_F(SegmentedScanTest, RejectsTooSmallTempAndNullPointers) {
  DeviceBuffer<int32_t> d(1000);
  DeviceBuffer<uint32_t> k(1000);
  using Op = ops::Sum<int32_t>;
  std::size_t bytes = 0;
  ASSERT_EQ((kernels::SegmentedScan<int32_t, Op, uint32_t>(nullptr, bytes, nullptr, nullptr, nullptr, 1000, false,
                                                           nullptr, nullptr, nullptr)),
            cudaSuccess);
  TempBuffer temp;
  void* tmp = temp.Reserve(bytes);
  std::size_t small = 16;
  EXPECT_EQ((kernels::SegmentedScan<int32_t, Op, uint32_t>(tmp, small, d.get(), k.get(), d.get(), 1000, false, nullptr,
                                                           nullptr, nullptr)),
            cudaErrorInvalidValue);
  EXPECT_EQ((kernels::SegmentedScan<int32_t, Op, uint32_t>(tmp, bytes, d.get(), nullptr, d.get(), 1000, false,
                                                           nullptr, nullptr, nullptr)),
            cudaErrorInvalidValue);
}

}  // namespace
}  // namespace gpuscan::gputest
