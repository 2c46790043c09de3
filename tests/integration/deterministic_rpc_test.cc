// Issue 11 over the wire: float SUM/PRODUCT scans and reductions give the canonical tree's bits
// (tests/common/canonical_reference.h) whatever the client's chunk size, under concurrent
// calls, on whichever engine the suite runs against (GPUSCAN_TEST_ENGINE=cuda: the CUDA one;
// the reference is the same, so passing on both is CPU-vs-CUDA bit identity). GetServerInfo
// names the default; Timing names what ran.
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "canonical_reference.h"
#include "reference.h"
#include "test_server.h"

namespace gpuscan {
namespace {

using testing::TestServer;

class DeterministicRpcTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = new TestServer(); }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  static TestServer* server_;
};
TestServer* DeterministicRpcTest::server_ = nullptr;

template <class T>
std::vector<T> SumInput(std::mt19937_64& rng, size_t n) {
  std::vector<T> x(n);
  for (T& v : x) v = std::ldexp(testing::UniformReal<T>(rng, T(-1), T(1)), testing::UniformInt<int>(rng, -12, 12));
  return x;
}

template <class T>
::testing::AssertionResult BitIdentical(const std::vector<T>& got, const std::vector<T>& want) {
  if (got.size() != want.size()) {
    return ::testing::AssertionFailure() << "size " << got.size() << " vs " << want.size();
  }
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::memcmp(&got[i], &want[i], sizeof(T)) != 0) {
      return ::testing::AssertionFailure() << "first difference at [" << i << "]: " << got[i] << " vs canonical "
                                           << want[i];
    }
  }
  return ::testing::AssertionSuccess();
}

TEST_F(DeterministicRpcTest, ServerInfoNamesTheDefault) {
  Client client(server_->client_options());
  const v1::ServerInfo info = client.Info();
  EXPECT_EQ(info.float_scan_default(), v1::SCAN_ALGORITHM_DETERMINISTIC);
  bool offered = false;
  for (int a : info.scan_algorithms()) offered |= a == v1::SCAN_ALGORITHM_DETERMINISTIC;
  EXPECT_TRUE(offered);
}

// 4 KiB, 1 MiB, 4 MiB and odd chunk sizes, inclusive and exclusive, plus the reduction.
TEST_F(DeterministicRpcTest, Float32SumAnyChunkSize) {
  GPUSCAN_SEEDED_RNG(rng);
  const size_t n = (size_t{1} << 20) + 3 * 4097;  // past one super (2^20), ends mid-tile
  const std::vector<float> x = SumInput<float>(rng, n);
  for (bool exclusive : {false, true}) {
    const std::vector<float> want = testing::CanonicalScanRef<float, ops::Sum<float>>(x, exclusive);
    for (size_t chunk : {size_t{4} << 10, size_t{1} << 20, size_t{4} << 20, size_t{4 * 12347}, size_t{4 * 4095}}) {
      Client client(server_->client_options(chunk));
      ScanOptions o;
      o.exclusive = exclusive;
      const ScanResult<float> r = client.Scan(x, o);
      EXPECT_TRUE(BitIdentical(r.values, want)) << "chunk bytes " << chunk << (exclusive ? " exclusive" : "");
      EXPECT_EQ(r.timing.algorithm, "deterministic");
    }
  }
  for (size_t chunk : {size_t{4} << 10, size_t{4 * 12347}}) {
    Client client(server_->client_options(chunk));
    const float got = client.Reduce(x, v1::OPERATOR_SUM).value;
    const float want = testing::CanonicalReduceRef<float, ops::Sum<float>>(x);
    EXPECT_EQ(std::memcmp(&got, &want, sizeof(float)), 0) << got << " vs canonical " << want << ", chunk " << chunk;
  }
}

TEST_F(DeterministicRpcTest, Float64ProductConcurrentCalls) {
  GPUSCAN_SEEDED_RNG(rng);
  const size_t n = 300000;
  std::vector<double> x(n);
  for (double& v : x) v = std::exp(testing::UniformReal<double>(rng, -0.01, 0.01));
  const std::vector<double> want = testing::CanonicalScanRef<double, ops::Product<double>>(x, false);
  std::vector<std::vector<double>> got(4);
  std::vector<std::thread> threads;
  for (size_t k = 0; k < got.size(); ++k) {
    threads.emplace_back([&, k] {
      Client client(server_->client_options(8 * (1000 + 33333 * k)));
      ScanOptions o;
      o.op = v1::OPERATOR_PRODUCT;
      got[k] = client.Scan(x, o).values;
    });
  }
  for (auto& t : threads) t.join();
  for (size_t k = 0; k < got.size(); ++k) EXPECT_TRUE(BitIdentical(got[k], want)) << "call " << k;
}

}  // namespace
}  // namespace gpuscan
