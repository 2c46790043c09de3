// CanonicalScan (issue 11) against the independent whole-array reference of the canonical
// tree, bit for bit: float/double x SUM/PRODUCT x inclusive/exclusive, in one call and split
// into calls of any tile counts (the state carries across, supers cross call boundaries), and
// with launches capped at a few tiles; run twice for run-to-run identity on one temp buffer
// that a look-back scan dirties before each run (the temp contract: any algorithm may run on
// it in between); outputs poisoned.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "canonical_reference.h"
#include "gpu_test_util.h"
#include "gpuscan/kernels/canonical_scan.h"
#include "gpuscan/kernels/scan.h"
#include "gpuscan/kernels/testing.h"

namespace gpuscan::gputest {
namespace {

constexpr std::size_t kTile = 4096;

template <class T, class Op>
std::vector<T> Input(std::mt19937_64& rng, std::size_t n) {
  std::vector<T> x(n);
  for (T& v : x) {
    if constexpr (std::is_same_v<Op, ops::Product<T>>) {
      v = std::exp(testing::UniformReal<T>(rng, T(-0.01), T(0.01)));
    } else {
      v = std::ldexp(testing::UniformReal<T>(rng, T(-1), T(1)), testing::UniformInt<int>(rng, -12, 12));
    }
  }
  return x;
}

template <class T>
std::string FirstDifference(const std::vector<T>& got, const std::vector<T>& want) {
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (std::memcmp(&got[i], &want[i], sizeof(T)) != 0) {
      return "first difference at [" + std::to_string(i) + "]: " + std::to_string(got[i]) + " vs canonical " +
             std::to_string(want[i]);
    }
  }
  return "";
}

// A temp buffer sized for `most` tiles and for a look-back scan of as many elements, cleared
// once, as the engine keeps one per lane.
template <class T, class Op>
struct SharedTemp {
  void* temp = nullptr;
  std::size_t bytes = 0;
  explicit SharedTemp(uint64_t most) {
    EXPECT_EQ((kernels::CanonicalScan<T, Op>(nullptr, bytes, nullptr, nullptr, most, 0, false, nullptr, nullptr)),
              cudaSuccess);
    std::size_t scan_bytes = 0;
    EXPECT_EQ((kernels::Scan<T, Op>(kernels::ScanAlgorithm::kDecoupledLookback, nullptr, scan_bytes, nullptr, nullptr,
                                    most * kTile, false, nullptr, nullptr, nullptr)),
              cudaSuccess);
    bytes = std::max(bytes, scan_bytes);
    EXPECT_EQ(cudaMalloc(&temp, bytes), cudaSuccess);
    EXPECT_EQ(kernels::ClearTempStorage(temp, bytes, nullptr), cudaSuccess);
  }
  ~SharedTemp() { cudaFree(temp); }
  // Leaves a look-back scan's tile words of the same tiles in the buffer.
  void Dirty(const T* d_in, T* d_out, uint64_t n) {
    std::size_t b = bytes;
    EXPECT_EQ((kernels::Scan<T, Op>(kernels::ScanAlgorithm::kDecoupledLookback, temp, b, d_in, d_out, n, false, nullptr,
                                    nullptr, nullptr)),
              cudaSuccess);
  }
};

// Runs the scan as calls of calls[i] tiles each on `temp`, after dirtying it; returns the output.
// The arrays start `shift` elements into their buffers (1: not 16-byte aligned).
template <class T, class Op>
std::vector<T> RunCalls(SharedTemp<T, Op>& temp, const std::vector<T>& x, const std::vector<uint64_t>& calls,
                        bool exclusive, std::size_t shift = 0) {
  const std::size_t n = x.size();
  DeviceBuffer<T> buf_in(n + shift), buf_out(n + shift);
  buf_in.Upload(x, shift);
  T* in = buf_in.get() + shift;
  T* out = buf_out.get() + shift;
  temp.Dirty(in, out, n);
  buf_out.Poison();
  kernels::CanonicalState<T>* state = nullptr;
  EXPECT_EQ(cudaMalloc(reinterpret_cast<void**>(&state), sizeof(*state)), cudaSuccess);
  // A new array's first call writes the state without reading it: NaN bytes and a set carry
  // flag here would show in every element if it were read.
  EXPECT_EQ(cudaMemset(state, 0xFF, sizeof(*state)), cudaSuccess);
  uint64_t tile = 0;
  for (uint64_t t : calls) {
    std::size_t b = temp.bytes;
    EXPECT_EQ((kernels::CanonicalScan<T, Op>(temp.temp, b, in + tile * kTile, out + tile * kTile, t, tile, exclusive,
                                             state, nullptr)),
              cudaSuccess);
    tile += t;
  }
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_TRUE(buf_out.GuardIntact());
  cudaFree(state);
  return buf_out.Download(n, shift);
}

class CanonicalKernelTest : public GpuTest {
 protected:
  template <class T, class Op>
  void Sweep() {
    GPUSCAN_SEEDED_RNG(rng);
    const std::vector<std::vector<uint64_t>> splits = {
        {1}, {2}, {255}, {256}, {257}, {1, 1, 1}, {100, 200, 300}, {256, 256}, {3, 509, 7}, {600},
        {64, 65}};  // either side of the launches that take tiles by block index (kIndexedTilesMax)
    SharedTemp<T, Op> temp(600);
    // 7 tiles a launch: a scan of 600 tiles takes 86 launches; 3 blocks: up to 200 tiles a block;
    // walk: every carry folded by the walk back from the nearest published one.
    struct Config {
      uint32_t cap, blocks;
      bool walk;
    };
    for (const auto& [cap, blocks, walk] : {Config{0, 0, false}, Config{7, 0, false}, Config{0, 3, false},
                                             Config{0, 3, true}}) {
    kernels::testing_hooks::SetMaxTilesPerLaunch(cap);
    kernels::testing_hooks::SetMaxPersistentBlocks(blocks);
    kernels::testing_hooks::SetCanonicalCarryWalk(walk);
    for (const auto& calls : splits) {
      const uint64_t tiles = std::accumulate(calls.begin(), calls.end(), uint64_t{0});
      const std::vector<T> x = Input<T, Op>(rng, tiles * kTile);
      for (bool exclusive : {false, true}) {
        const std::vector<T> want = testing::CanonicalScanRef<T, Op>(x, exclusive);
        std::string what = std::string(DtypeName<T>()) + " " + Op::kName + (exclusive ? " exclusive" : " inclusive") +
                           ", launches of at most " + (cap ? std::to_string(cap) : "any") + " tiles on " +
                           (blocks ? std::to_string(blocks) : "all") + " blocks" + (walk ? ", carries by the walk" : "") +
                           ", calls of";
        for (uint64_t t : calls) what += " " + std::to_string(t);
        const std::vector<T> got = RunCalls<T, Op>(temp, x, calls, exclusive);
        EXPECT_EQ(FirstDifference(got, want), "") << what;
        const std::vector<T> again = RunCalls<T, Op>(temp, x, calls, exclusive);
        EXPECT_EQ(std::memcmp(got.data(), again.data(), got.size() * sizeof(T)), 0) << what << ": second run differs";
      }
    }
    }
    kernels::testing_hooks::SetMaxTilesPerLaunch(0);
    kernels::testing_hooks::SetMaxPersistentBlocks(0);
    kernels::testing_hooks::SetCanonicalCarryWalk(false);
  }
};

TEST_F(CanonicalKernelTest, Float32Sum) { Sweep<float, ops::Sum<float>>(); }
TEST_F(CanonicalKernelTest, Float32Product) { Sweep<float, ops::Product<float>>(); }
TEST_F(CanonicalKernelTest, Float64Sum) { Sweep<double, ops::Sum<double>>(); }
TEST_F(CanonicalKernelTest, Float64Product) { Sweep<double, ops::Product<double>>(); }

// Arrays at any element alignment (the engine's are 16-byte aligned).
TEST_F(CanonicalKernelTest, UnalignedArrays) {
  GPUSCAN_SEEDED_RNG(rng);
  using Op = ops::Sum<float>;
  const std::vector<uint64_t> calls = {3, 509, 7};
  const std::vector<float> x = Input<float, Op>(rng, 519 * kTile);
  SharedTemp<float, Op> temp(509);
  for (bool exclusive : {false, true}) {
    const std::vector<float> want = testing::CanonicalScanRef<float, Op>(x, exclusive);
    EXPECT_EQ(FirstDifference(RunCalls<float, Op>(temp, x, calls, exclusive, 1), want), "") << exclusive;
  }
}

// Reduce-only calls (no output) advance the state exactly as scans do: a scan continued from
// that state matches the reference.
TEST_F(CanonicalKernelTest, StateOnlyCallsThenScan) {
  GPUSCAN_SEEDED_RNG(rng);
  using Op = ops::Sum<float>;
  const uint64_t head = 300, tail = 230;
  const std::vector<float> x = Input<float, Op>(rng, (head + tail) * kTile);
  const std::vector<float> want = testing::CanonicalScanRef<float, Op>(x, false);
  DeviceBuffer<float> d_in(x.size()), d_out(x.size());
  d_in.Upload(x);
  kernels::CanonicalState<float>* state = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&state), sizeof(*state)), cudaSuccess);
  cudaMemset(state, 0xFF, sizeof(*state));  // not read by the first call (first_tile 0)
  std::size_t bytes = 0;
  kernels::CanonicalScan<float, Op>(nullptr, bytes, nullptr, nullptr, head, 0, false, nullptr, nullptr);
  void* temp = nullptr;
  ASSERT_EQ(cudaMalloc(&temp, bytes), cudaSuccess);
  cudaMemset(temp, 0, bytes);
  std::size_t b = bytes;
  EXPECT_EQ((kernels::CanonicalScan<float, Op>(temp, b, d_in.get(), nullptr, head, 0, false, state, nullptr)), cudaSuccess);
  EXPECT_EQ((kernels::CanonicalScan<float, Op>(temp, b, d_in.get() + head * kTile, d_out.get() + head * kTile, tail,
                                               head, false, state, nullptr)),
            cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<float> got = d_out.Download(tail * kTile, head * kTile);
  const std::vector<float> want_tail(want.begin() + head * kTile, want.end());
  EXPECT_EQ(FirstDifference(got, want_tail), "");
  cudaFree(temp);
  cudaFree(state);
}

}  // namespace
}  // namespace gpuscan::gputest
