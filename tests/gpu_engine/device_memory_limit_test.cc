// --device-memory-limit: below what one staging lane needs, calls fail with RESOURCE_EXHAUSTED
// naming the flag and the server stays SERVING; with room for one lane only, concurrent calls
// share it and all get correct answers.
#include <gtest/gtest.h>

#include <future>
#include <vector>

#include "reference.h"
#include "test_server.h"

namespace gpuscan {
namespace {

std::unique_ptr<server::Server> StartCudaServer(uint64_t limit) {
  engine::EngineOptions eo;
  eo.kind = engine::EngineKind::kCuda;
  eo.device_memory_limit = limit;
  auto eng = engine::MakeEngine(eo, nullptr);
  server::ServerOptions so;
  so.address = "127.0.0.1:0";
  return server::Server::Start(so, std::move(eng));
}

bool HaveDevice() {
  try {
    engine::EngineOptions eo;
    eo.kind = engine::EngineKind::kCuda;
    return engine::MakeEngine(eo, nullptr) != nullptr;
  } catch (const engine::Error&) {
    return false;
  }
}

TEST(DeviceMemoryLimitTest, FarBelowALaneIsResourceExhaustedAndServerStaysHealthy) {
  if (!HaveDevice()) GTEST_SKIP() << "no CUDA device";
  auto srv = StartCudaServer(1 << 20);
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
  if (!HaveDevice()) GTEST_SKIP() << "no CUDA device";
  auto srv = StartCudaServer(24 << 20);  // one lane (~17 MiB) and its temporaries, not two
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
