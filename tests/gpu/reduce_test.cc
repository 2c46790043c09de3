// Reduce: every dtype x operator x size, ours and CUB's, with and without a carry; floats
// bit-identical run to run; chaining through a device carry.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "gpu_test_util.h"
#include "gpuscan/kernels/reduce.h"

namespace gpuscan::gputest {
namespace {

using testing::RandomInput;

// Runs Reduce once on the device; returns the result.
template <class T, class Op>
T RunReduce(bool use_cub, const T* d_in, uint64_t n, const T* d_carry, TempBuffer& temp) {
  DeviceBuffer<T> d_out(1);
  std::size_t bytes = 0;
  EXPECT_EQ((kernels::Reduce<T, Op>(use_cub, nullptr, bytes, d_in, n, d_carry, d_out.get(), nullptr)), cudaSuccess);
  void* tmp = temp.Reserve(bytes);
  EXPECT_EQ((kernels::Reduce<T, Op>(use_cub, tmp, bytes, d_in, n, d_carry, d_out.get(), nullptr)), cudaSuccess);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_TRUE(d_out.GuardIntact());
  return d_out.DownloadOne();
}

class ReduceTest : public GpuTest, public ::testing::WithParamInterface<bool> {
 protected:
  template <class T>
  void SweepDtype() {
    GPUSCAN_SEEDED_RNG(rng);
    TempBuffer temp;
    const bool use_cub = GetParam();
    ForEachOp<T>([&](auto op) {
      using Op = decltype(op);
      int k = 0;
      for (uint64_t n : {0ull, 1ull, 31ull, 32ull, 33ull, 4095ull, 4096ull, 4097ull, 65537ull,
                         (1ull << 22) + 5}) {
        const bool with_carry = (k++ % 2) == 1;
        SCOPED_TRACE(std::string(use_cub ? "cub " : "own ") + DtypeName<T>() + " " + Op::kName +
                     " n=" + std::to_string(n) + (with_carry ? " with carry" : ""));
        const std::vector<T> x = RandomInput<T, Op>(n, rng);
        const T carry = with_carry ? RandomInput<T, Op>(1, rng)[0] : Op::identity();
        DeviceBuffer<T> d_in(n), d_carry(1);
        d_in.Upload(x);
        d_carry.Upload({carry});
        const T got = RunReduce<T, Op>(use_cub, d_in.get(), n, with_carry ? d_carry.get() : nullptr, temp);
        std::vector<T> v{carry};
        v.insert(v.end(), x.begin(), x.end());
        testing::ExpectReduceNear<T, Op>(got, testing::ReduceRef<T, Op>(v), v);
        if (HasFatalFailure()) return;
      }
    });
  }
};

TEST_P(ReduceTest, Int32) { SweepDtype<int32_t>(); }
TEST_P(ReduceTest, Int64) { SweepDtype<int64_t>(); }
TEST_P(ReduceTest, Uint32) { SweepDtype<uint32_t>(); }
TEST_P(ReduceTest, Uint64) { SweepDtype<uint64_t>(); }
TEST_P(ReduceTest, Float) { SweepDtype<float>(); }
TEST_P(ReduceTest, Double) { SweepDtype<double>(); }

// The same input reduces to the same bits every time (no float atomics; a fixed association).
TEST_F(GpuTest, ReduceFloatsAreDeterministic) {
  GPUSCAN_SEEDED_RNG(rng);
  TempBuffer temp;
  for (uint64_t n : {100003ull, (1ull << 24) + 7}) {
    const std::vector<float> xf = RandomInput<float, ops::Sum<float>>(n, rng);
    const std::vector<double> xd = RandomInput<double, ops::Sum<double>>(n, rng);
    DeviceBuffer<float> df(n);
    DeviceBuffer<double> dd(n);
    df.Upload(xf);
    dd.Upload(xd);
    std::vector<float> rf;
    std::vector<double> rd;
    for (int run = 0; run < 4; ++run) {
      rf.push_back(RunReduce<float, ops::Sum<float>>(false, df.get(), n, nullptr, temp));
      rd.push_back(RunReduce<double, ops::Sum<double>>(false, dd.get(), n, nullptr, temp));
    }
    testing::ExpectSameBits(rf, std::vector<float>(rf.size(), rf[0]), "float sums of one input");
    testing::ExpectSameBits(rd, std::vector<double>(rd.size(), rd[0]), "double sums of one input");
    std::vector<double> v(xd.begin(), xd.end());
    testing::ExpectReduceNear<double, ops::Sum<double>>(rd[0], testing::ReduceRef<double, ops::Sum<double>>(v), v);
  }
}

// Chunks reduced one after another with the partial on the device (carry in = out) equal one
// reduction.
TEST_P(ReduceTest, ChainedCallsMatchOneReduce) {
  GPUSCAN_SEEDED_RNG(rng);
  TempBuffer temp;
  ForEachDtype([&](auto t) {
    using T = decltype(t);
    ForEachOp<T>([&](auto op) {
      using Op = decltype(op);
      const uint64_t n = 300000;
      SCOPED_TRACE(std::string(DtypeName<T>()) + " " + Op::kName + " chained");
      const std::vector<T> x = RandomInput<T, Op>(n, rng);
      const T carry = RandomInput<T, Op>(1, rng)[0];
      DeviceBuffer<T> d_in(n), d_acc(1);
      d_in.Upload(x);
      d_acc.Upload({carry});
      std::size_t bytes = 0;
      CUDA_OK((kernels::Reduce<T, Op>(GetParam(), nullptr, bytes, d_in.get(), n, d_acc.get(), d_acc.get(), nullptr)));
      void* tmp = temp.Reserve(bytes);
      uint64_t off = 0;
      for (std::size_t len : testing::RandomChunkLengths(n, rng, 20000)) {
        CUDA_OK((kernels::Reduce<T, Op>(GetParam(), tmp, bytes, d_in.get() + off, len, d_acc.get(), d_acc.get(), nullptr)));
        off += len;
      }
      CUDA_OK(cudaDeviceSynchronize());
      std::vector<T> v{carry};
      v.insert(v.end(), x.begin(), x.end());
      testing::ExpectReduceNear<T, Op>(d_acc.DownloadOne(), testing::ReduceRef<T, Op>(v), v);
    });
  });
}

INSTANTIATE_TEST_SUITE_P(Impl, ReduceTest, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return std::string(info.param ? "cub" : "own");
                         });

}  // namespace
}  // namespace gpuscan::gputest
