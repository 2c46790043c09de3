// A sticky CUDA error while serving: the call that meets it fails with UNAVAILABLE, the health
// service turns NOT_SERVING, the log says why, and later calls are refused up front instead of
// computing garbage. The fault corrupts the process's CUDA context, so this test must run in a
// process of its own (CTest runs each discovered test alone; scripts/gpu-suite.sh filters it).
#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <memory>
#include <set>
#include <sstream>
#include <string>

#include "cuda_test_server.h"
#include "fault_kernel.h"
#include "reference.h"
#include "test_server.h"

namespace gpuscan {
namespace {

grpc::StatusCode CodeOfScan(Client& client, const std::vector<int32_t>& x, std::string* message) {
  try {
    client.Scan(x);
    return grpc::StatusCode::OK;
  } catch (const RpcError& e) {
    *message = e.what();
    return e.code();
  }
}

// A server on `eng` with a client, the log captured while it lives.
struct Served {
  explicit Served(std::unique_ptr<engine::Engine> eng)
      : sink(std::make_shared<spdlog::sinks::ostream_sink_mt>(log)), srv(testing::StartOnLoopback(std::move(eng))),
        client([this] {
          ClientOptions co;
          co.target = srv->address();
          co.timeout = std::chrono::seconds(30);
          return co;
        }()) {
    spdlog::default_logger()->sinks().push_back(sink);
  }
  ~Served() {
    auto& sinks = spdlog::default_logger()->sinks();
    sinks.erase(std::remove(sinks.begin(), sinks.end(), sink), sinks.end());
    srv->Shutdown();
  }
  std::ostringstream log;
  std::shared_ptr<spdlog::sinks::ostream_sink_mt> sink;
  std::unique_ptr<server::Server> srv;
  Client client;
};

TEST(StickyFaultTest, DeviceFaultTurnsHealthNotServingAndRefusesLaterCalls) {
  std::string why;
  auto eng = testing::CudaEngineOrNull({}, &why);
  if (!eng) GTEST_SKIP() << why;
  Served served(std::move(eng));
  Client& client = served.client;
  const std::ostringstream& log = served.log;

  GPUSCAN_SEEDED_RNG(rng);
  const auto x = testing::RandomInput<int32_t, ops::Sum<int32_t>>(1'000'003, rng);
  ASSERT_EQ(client.Scan(x).values, (testing::ScanRef<int32_t, ops::Sum<int32_t>>(x, false)));
  ASSERT_EQ(client.Health(""), "SERVING");

  EXPECT_EQ(testing::InjectStickyDeviceFault(0), "cudaErrorIllegalAddress");

  std::string message;
  EXPECT_EQ(CodeOfScan(client, x, &message), grpc::StatusCode::UNAVAILABLE) << message;
  EXPECT_NE(message.find("CUDA"), std::string::npos) << message;
  EXPECT_EQ(client.Health(""), "NOT_SERVING");
  EXPECT_EQ(client.Health("gpuscan.v1.GpuScan"), "NOT_SERVING");
  EXPECT_NE(log.str().find("unhealthy"), std::string::npos) << log.str();
  EXPECT_NE(log.str().find("IllegalAddress"), std::string::npos) << log.str();

  // Refused at the header from now on: nothing is computed on a broken device.
  EXPECT_EQ(CodeOfScan(client, x, &message), grpc::StatusCode::UNAVAILABLE) << message;
}

// Two devices (the two-GPU machine; skipped with fewer): device 1 gets a sticky fault, the call
// that meets it fails UNAVAILABLE, the device is drained and logged, and device 0 keeps serving
// correct results with health SERVING. Its own process too (scripts/gpu-suite.sh: DeviceDrain*).
TEST(DeviceDrainTest, StickyFaultOnDevice1LeavesDevice0Serving) {
  engine::EngineOptions eo;
  eo.devices = {0, 1};
  std::string why;
  auto eng = testing::CudaEngineOrNull(eo, &why);
  if (!eng) GTEST_SKIP() << "needs two CUDA devices: " << why;
  Served served(std::move(eng));
  Client& client = served.client;
  const std::ostringstream& log = served.log;
  GPUSCAN_SEEDED_RNG(rng);
  const auto x = testing::RandomInput<int32_t, ops::Sum<int32_t>>(1'000'003, rng);
  const auto want = testing::ScanRef<int32_t, ops::Sum<int32_t>>(x, false);
  std::set<std::string> used;
  for (int i = 0; i < 4; ++i) {  // one call at a time: turns alternate over both devices
    const ScanResult<int32_t> r = client.Scan(x);
    ASSERT_EQ(r.values, want);
    used.insert(r.timing.device);
  }
  ASSERT_EQ(used.size(), 2u);

  EXPECT_EQ(testing::InjectStickyDeviceFault(1), "cudaErrorIllegalAddress");
  int failures = 0;
  for (int i = 0; i < 10; ++i) {
    try {
      const ScanResult<int32_t> r = client.Scan(x);
      EXPECT_EQ(r.values, want);
      EXPECT_EQ(r.timing.device.rfind("0: ", 0), 0u) << r.timing.device;
    } catch (const RpcError& e) {
      EXPECT_EQ(e.code(), grpc::StatusCode::UNAVAILABLE) << e.what();
      ++failures;
    }
  }
  EXPECT_LE(failures, 1);  // only the call that met device 1 before it was drained
  EXPECT_EQ(client.Health(""), "SERVING");
  EXPECT_NE(log.str().find("device 1: "), std::string::npos) << log.str();
  EXPECT_NE(log.str().find("gets no more calls"), std::string::npos) << log.str();
}

}  // namespace
}  // namespace gpuscan
