// --device-memory-limit: below what one staging lane needs, calls fail with RESOURCE_EXHAUSTED
// naming the flag and the server stays SERVING; with room for one lane only, concurrent calls
// share it and all get correct answers.
#include <gtest/gtest.h>

#include <future>
#include <vector>

#include "cuda_test_server.h"
#include "reference.h"
#include "test_server.h"

namespace gpuscan {
namespace {

// A server on the CUDA engine capped at `limit` bytes of device memory; null (and *why set)
// without a device.
std::unique_ptr<server::Server> StartCudaServer(uint64_t limit, std::string* why) {
  engine::EngineOptions eo;
  eo.device_memory_limit = limit;
  auto eng = testing::CudaEngineOrNull(eo, why);
  return eng ? testing::StartOnLoopback(std::move(eng)) : nullptr;
}

TEST(DeviceMemoryLimitTest, FarBelowALaneIsResourceExhaustedAndServerStaysHealthy) {
  std::string why;
  auto srv = StartCudaServer(1 << 20, &why);
  if (!srv) GTEST_SKIP() << why;
  ClientOptions co;
  co.target = srv->address();
  co.timeout = std::chrono::seconds(30);
  Client client(co);
  GPUSCAN_SEEDED_RNG(rng);
  const auto x = testing::RandomInput<int32_t, ops::Sum<int32_t>>(100'000, rng);
  for (int i = 0; i < 3; ++i) {
    try {
      client.Scan(x);
      ADD_FAILURE() << "a scan ran within a 1 MiB device memory limit";
    } catch (const RpcError& e) {
      EXPECT_EQ(e.code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << e.what();
      EXPECT_NE(std::string(e.what()).find("--device-memory-limit"), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(client.Health(""), "SERVING");
  srv->Shutdown();
}

TEST(DeviceMemoryLimitTest, RoomForOneLaneServesConcurrentCallsCorrectly) {
  std::string why;
  auto srv = StartCudaServer(24 << 20, &why);  // one lane (~17 MiB) and its temporaries, not two
  if (!srv) GTEST_SKIP() << why;
  ClientOptions co;
  co.target = srv->address();
  co.timeout = std::chrono::seconds(60);
  std::vector<std::future<bool>> calls;
  for (int c = 0; c < 8; ++c) {
    calls.push_back(std::async(std::launch::async, [&co, c] {
      Client client(co);
      std::mt19937_64 rng(testing::NewSeed() + c);
      const auto x = testing::RandomInput<int64_t, ops::Max<int64_t>>(3'000'001 + c, rng);
      ScanOptions so;
      so.op = v1::OPERATOR_MAX;
      return client.Scan(x, so).values == testing::ScanRef<int64_t, ops::Max<int64_t>>(x, false);
    }));
  }
  for (auto& f : calls) EXPECT_TRUE(f.get());
  srv->Shutdown();
}

}  // namespace
}  // namespace gpuscan
