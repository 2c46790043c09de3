// The fused reduce by key (kernels::ReduceByKey): one (key, reduction) per run, bit for bit against
// a sequential loop, over the sizes where tiling goes wrong, keys of 4 and 8 bytes, one run over
// everything and runs of one element; whole (the last run closed by the call) or streamed as
// calls chained through the device carry the way the engine calls it (a run that closed between
// calls and the run still open at the end are emitted from the carry).
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <utility>
#include <vector>

#include "detail/tuning.cuh"
#include "gpu_test_util.h"
#include "gpuscan/kernels/reduce_by_key.h"

namespace gpuscan::gputest {
namespace {

template <class T>
constexpr uint64_t Tile() {
  return kernels::detail::ReduceByKeyTuning<kernels::detail::kTunedArch, sizeof(T)>::kTile;
}

template <class K>
std::vector<K> KeysOfKind(std::size_t n, int kind, std::size_t mean_run, std::mt19937_64& rng) {
  if (kind == 1) return std::vector<K>(n, K(5));  // one run
  if (kind == 2) {                                // every element its own run
    std::vector<K> k(n);
    for (std::size_t i = 0; i < n; ++i) k[i] = K(i * 3 + 1);
    return k;
  }
  return testing::RandomSegmentKeys<K>(n, rng, mean_run);
}

// Runs x under keys as calls of the given lengths. whole: one call that closes its last run;
// else every call leaves its last run open and the caller emits runs from the carry.
template <class T, class Op, class K>
void CheckRuns(const std::vector<T>& x, const std::vector<K>& keys, const std::vector<std::size_t>& calls,
               const std::string& what) {
  const std::size_t n = x.size();
  const bool whole = calls.size() == 1;
  DeviceBuffer<T> d_x(n), d_vout(n);
  DeviceBuffer<K> d_k(n), d_kout(n);
  DeviceBuffer<kernels::RunCarry<T>> d_carry(1);
  ASSERT_TRUE(d_x.ok() && d_vout.ok() && d_k.ok() && d_kout.ok() && d_carry.ok());
  d_x.Upload(x);
  d_k.Upload(keys);
  std::size_t temp_bytes = 0;
  ASSERT_EQ((kernels::ReduceByKey<T, Op, K>(nullptr, temp_bytes, nullptr, nullptr, nullptr, nullptr, n, whole, nullptr,
                                            nullptr, nullptr)),
            cudaSuccess);
  TempBuffer temp;
  void* tmp = temp.Reserve(temp_bytes);
  std::vector<K> got_keys;
  std::vector<T> got_values;
  auto emit_carry = [&](const kernels::RunCarry<T>& c) {
    got_keys.push_back(K(c.last_key));
    got_values.push_back(c.value);
  };
  std::size_t done = 0;
  for (std::size_t c = 0; c < calls.size(); ++c) {
    const std::size_t len = calls[c];
    const kernels::RunCarry<T> before = d_carry.DownloadOne();
    if (c > 0 && len > 0 && before.started && keys[done] != K(before.last_key)) emit_carry(before);
    std::size_t b = temp_bytes;
    CUDA_OK((kernels::ReduceByKey<T, Op, K>(tmp, b, d_x.get() + done, d_k.get() + done, d_kout.get(), d_vout.get(), len,
                                            whole, c == 0 ? nullptr : d_carry.get(), d_carry.get(), nullptr)));
    CUDA_OK(cudaDeviceSynchronize());
    const kernels::RunCarry<T> after = d_carry.DownloadOne();
    ASSERT_LE(after.runs, len) << what;
    const auto k = d_kout.Download(after.runs);
    const auto v = d_vout.Download(after.runs);
    got_keys.insert(got_keys.end(), k.begin(), k.end());
    got_values.insert(got_values.end(), v.begin(), v.end());
    done += len;
  }
  if (!whole) {
    const kernels::RunCarry<T> last = d_carry.DownloadOne();
    if (last.started) emit_carry(last);
  }
  const auto want = testing::ReduceByKeyRef<T, Op, K>(x, keys);
  ASSERT_EQ(got_keys.size(), want.first.size()) << what << ": run count";
  EXPECT_TRUE(testing::SameBytes(got_keys.data(), want.first.data(), got_keys.size() * sizeof(K))) << what << ": keys";
  EXPECT_TRUE(testing::SameBytes(got_values.data(), want.second.data(), got_values.size() * sizeof(T)))
      << what << ": values";
  EXPECT_TRUE(d_vout.GuardIntact() && d_kout.GuardIntact()) << what << ": wrote past the end";
}

template <class T, class Op, class K>
void Sweep(std::mt19937_64& rng) {
  const uint64_t t = Tile<T>();
  for (const uint64_t n : {uint64_t{1}, uint64_t{31}, uint64_t{33}, t - 1, t, t + 1, 3 * t + 1, 33 * t + 7}) {
    const auto x = testing::RandomInput<T, Op>(n, rng);
    for (const int kind : {0, 1, 2}) {
      for (const std::size_t mean_run : {std::size_t{2}, std::size_t{700}}) {
        if (kind != 0 && mean_run != 2) continue;
        const auto keys = KeysOfKind<K>(n, kind, mean_run, rng);
        const std::string what = "n=" + std::to_string(n) + " kind " + std::to_string(kind) + " run " +
                                 std::to_string(mean_run);
        CheckRuns<T, Op, K>(x, keys, {n}, what + " whole");
        CheckRuns<T, Op, K>(x, keys, {n, 0}, what + " streamed in one call");
        const std::size_t cut = rng() % (n + 1);
        CheckRuns<T, Op, K>(x, keys, {cut, 0, n - cut}, what + " cut " + std::to_string(cut));
        if (n > t) CheckRuns<T, Op, K>(x, keys, {t - 1, 1, n - t}, what + " cut around a tile");
      }
    }
  }
}

class ReduceByKeyTest : public GpuTest {};

TEST_F(ReduceByKeyTest, MatchesTheSequentialLoop) {
  GPUSCAN_SEEDED_RNG(rng);
  Sweep<int32_t, ops::Sum<int32_t>, uint32_t>(rng);
  Sweep<int32_t, ops::Min<int32_t>, uint64_t>(rng);
  Sweep<uint32_t, ops::BitXor<uint32_t>, uint32_t>(rng);
  Sweep<float, ops::Max<float>, uint64_t>(rng);
}

TEST_F(ReduceByKeyTest, RejectsWhatOneLaunchCannotNumber) {
  DeviceBuffer<int32_t> d(1000);
  DeviceBuffer<uint32_t> k(1000);
  DeviceBuffer<kernels::RunCarry<int32_t>> c(1);
  using Op = ops::Sum<int32_t>;
  std::size_t bytes = 0;
  ASSERT_EQ((kernels::ReduceByKey<int32_t, Op, uint32_t>(nullptr, bytes, nullptr, nullptr, nullptr, nullptr, 1000, true,
                                                         nullptr, nullptr, nullptr)),
            cudaSuccess);
  TempBuffer temp;
  void* tmp = temp.Reserve(bytes);
  EXPECT_EQ((kernels::ReduceByKey<int32_t, Op, uint32_t>(tmp, bytes, d.get(), k.get(), k.get(), d.get(), 1000, true,
                                                         nullptr, nullptr, nullptr)),
            cudaErrorInvalidValue)
      << "no carry out";
  EXPECT_EQ((kernels::ReduceByKey<int32_t, Op, uint32_t>(tmp, bytes, d.get(), k.get(), k.get(), d.get(),
                                                         uint64_t{1} << 31, true, nullptr, c.get(), nullptr)),
            cudaErrorInvalidValue)
      << "2^31 elements";
}

}  // namespace
}  // namespace gpuscan::gputest
