// A sticky CUDA error while serving: the call that meets it fails with UNAVAILABLE, the health
// service turns NOT_SERVING, the log says why, and later calls are refused up front instead of
// computing garbage. The fault corrupts the process's CUDA context, so this test must run in a
// process of its own (CTest runs each discovered test alone; `scripts/gpu run suite` filters it).
// DeviceDrainTest runs the server as processes instead: one worker per device.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cuda_test_server.h"
#include "fault_kernel.h"
#include "reference.h"
#include "server_process.h"
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

// The server program: GPUSCAN_BIN_DIR's (device runs carry binaries elsewhere) or the build's.
std::string ServerPath() {
  const char* dir = std::getenv("GPUSCAN_BIN_DIR");
  return dir && *dir ? std::string(dir) + "/gpuscan-server" : std::string(GPUSCAN_SERVER_PATH);
}

// This test program, which main.cc turns into a fault-injecting worker under
// GPUSCAN_AS_FAULT_WORKER (the front passes its environment on).
std::string SelfPath() {
  char self[4096] = {};
  return ::readlink("/proc/self/exe", self, sizeof(self) - 1) > 0 ? self : "";
}

// A front over `devices` whose workers are this program, a client of it, and a scan with its
// expected result.
struct FaultyFront {
  FaultyFront(const std::string& devices, const std::string& log)
      : process(std::make_unique<soak::ServerProcess>(
            ServerPath(), "cuda",
            std::vector<std::string>{"--devices", devices, "--isolate-devices", "on", "--worker-exe", SelfPath()},
            std::vector<std::string>{"GPUSCAN_AS_FAULT_WORKER=1"}, ::testing::TempDir() + "/" + log,
            std::chrono::seconds(120))),
        client([this] {
          ClientOptions co;
          co.target = process->target();
          co.timeout = std::chrono::seconds(60);
          return co;
        }()) {
    GPUSCAN_SEEDED_RNG(rng);
    x = testing::RandomInput<int32_t, ops::Sum<int32_t>>(1'000'003, rng);
    want = testing::ScanRef<int32_t, ops::Sum<int32_t>>(x, false);
  }
  std::unique_ptr<soak::ServerProcess> process;
  Client client;
  std::vector<int32_t> x, want;
};

// One device in a worker process of a front (--isolate-devices on): a sticky fault ends that
// worker (exit code 3) instead of the server; the call that met it fails UNAVAILABLE and a
// fresh worker serves correct results again. Runs on any machine with a GPU.
TEST(DeviceDrainTest, StickyFaultRestartsTheDevicesWorker) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count < 1) GTEST_SKIP() << "needs a CUDA device";
  FaultyFront served("0", "device_restart_front.log");
  soak::ServerProcess& front = *served.process;
  Client& client = served.client;
  const auto& x = served.x;
  const auto& want = served.want;
  ASSERT_EQ(client.Scan(x).values, want);
  const pid_t victim = soak::WorkerPid(front.pid(), 0);
  ASSERT_GT(victim, 0) << front.LogTail();
  ASSERT_EQ(::kill(victim, SIGUSR1), 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // the fault lands
  try {
    client.Scan(x);
    ADD_FAILURE() << "a scan on a device with a sticky fault succeeded";
  } catch (const RpcError& e) {
    EXPECT_EQ(e.code(), grpc::StatusCode::UNAVAILABLE) << e.what();
  }
  bool back = false;
  std::string last_error;
  for (int i = 0; i < 600 && !back; ++i) {
    try {
      EXPECT_EQ(client.Scan(x).values, want);
      back = true;
    } catch (const RpcError& e) {
      EXPECT_EQ(e.code(), grpc::StatusCode::UNAVAILABLE) << e.what();  // while the worker restarts
      last_error = e.what();
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  EXPECT_TRUE(back) << last_error << "\n" << front.LogTail(20000);
  EXPECT_EQ(client.Health(""), "SERVING");
  const pid_t fresh = soak::WorkerPid(front.pid(), 0);
  EXPECT_GT(fresh, 0);
  EXPECT_NE(fresh, victim);
  const std::string log = front.LogTail(50000);
  EXPECT_NE(log.find("cudaErrorIllegalAddress"), std::string::npos) << log;
  EXPECT_NE(log.find("exited with code 3"), std::string::npos) << log;
  std::string why;
  EXPECT_TRUE(front.Stop(std::chrono::seconds(30), &why)) << why;
}

// Two devices (the two-GPU machine; skipped with fewer), each in a worker process of a front
// (--isolate-devices on): device 1's worker gets a sticky fault; the call that meets it fails
// UNAVAILABLE, that worker ends and the front drains its device, device 0 keeps serving correct
// results with health SERVING, and device 1 comes back in a fresh worker. Real processes (the
// workers are this test program: the server plus a SIGUSR1 trigger for the fault, main.cc).
TEST(DeviceDrainTest, StickyFaultOnDevice1LeavesDevice0Serving) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count < 2) GTEST_SKIP() << "needs two CUDA devices";
  FaultyFront served("0,1", "device_drain_front.log");
  soak::ServerProcess& front = *served.process;
  Client& client = served.client;
  const auto& x = served.x;
  const auto& want = served.want;
  std::set<std::string> used;
  for (int i = 0; i < 4; ++i) {  // one call at a time: turns alternate over both devices
    const ScanResult<int32_t> r = client.Scan(x);
    ASSERT_EQ(r.values, want);
    used.insert(r.timing.device.substr(0, 3));
  }
  ASSERT_EQ(used, (std::set<std::string>{"0: ", "1: "}));

  const pid_t victim = soak::WorkerPid(front.pid(), 1);
  ASSERT_GT(victim, 0) << front.LogTail();
  ASSERT_EQ(::kill(victim, SIGUSR1), 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // the fault lands
  int failures = 0;
  for (int i = 0; i < 10 && failures == 0; ++i) {  // until a call meets device 1
    try {
      EXPECT_EQ(client.Scan(x).values, want);
    } catch (const RpcError& e) {
      EXPECT_EQ(e.code(), grpc::StatusCode::UNAVAILABLE) << e.what();
      ++failures;
    }
  }
  EXPECT_EQ(failures, 1);
  std::this_thread::sleep_for(std::chrono::seconds(1));  // the front has drained device 1
  for (int i = 0; i < 10; ++i) {
    const ScanResult<int32_t> r = client.Scan(x);
    EXPECT_EQ(r.values, want);
    EXPECT_EQ(r.timing.device.rfind("0: ", 0), 0u) << r.timing.device;
    EXPECT_EQ(client.Health(""), "SERVING");
  }
  // Device 1 serves again from a fresh worker process.
  bool back = false;
  for (int i = 0; i < 600 && !back; ++i) {
    try {
      const ScanResult<int32_t> r = client.Scan(x);
      EXPECT_EQ(r.values, want);
      back = r.timing.device.rfind("1: ", 0) == 0;
    } catch (const RpcError& e) {
      ADD_FAILURE() << e.what();
    }
    if (!back) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(back) << front.LogTail(20000);
  const std::string log = front.LogTail(50000);
  EXPECT_NE(log.find("cudaErrorIllegalAddress"), std::string::npos) << log;
  EXPECT_NE(log.find("device 1: "), std::string::npos) << log;
  EXPECT_NE(log.find("exited with code 3"), std::string::npos) << log;
  std::string why;
  EXPECT_TRUE(front.Stop(std::chrono::seconds(30), &why)) << why;
}

}  // namespace
}  // namespace gpuscan
