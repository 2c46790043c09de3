// The front of worker processes (--isolate-devices, server/isolation/), on the cpu engine: two
// "devices" (worker slots 0 and 1) behind one address. Every operation gives the same bits as a
// plain server; lanes, cancellation, deadlines and bad input pass through; a worker that dies is
// drained while the other serves, and comes back. The GPU version (a sticky CUDA fault in one
// worker) is DeviceDrainTest in tests/gpu_engine.
#include <signal.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gpuscan/client.h"
#include "isolation/worker_pool.h"
#include "http_get.h"
#include "prometheus_text.h"
#include "reference.h"
#include "server_process.h"

namespace gpuscan {
namespace {

using soak::ServerProcess;

std::string LogPath(const std::string& name) {
  return ::testing::TempDir() + "/isolation_" + name + "_" + std::to_string(::getpid()) + ".log";
}

// The server program: GPUSCAN_BIN_DIR's (device runs carry binaries elsewhere) or the build's.
std::string ServerPath() {
  const char* dir = std::getenv("GPUSCAN_BIN_DIR");
  return dir && *dir ? std::string(dir) + "/gpuscan-server" : std::string(GPUSCAN_SERVER_PATH);
}

// A front with worker slots 0 and 1 on the cpu engine.
std::unique_ptr<ServerProcess> StartFront(const std::string& name, std::vector<std::string> extra = {}) {
  std::vector<std::string> args = {"--devices", "0,1", "--isolate-devices", "on", "--cpu-threads", "2"};
  args.insert(args.end(), extra.begin(), extra.end());
  return std::make_unique<ServerProcess>(ServerPath(), "cpu", args, std::vector<std::string>{},
                                         LogPath(name));
}

Client ClientOf(const ServerProcess& s, std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
  ClientOptions co;
  co.target = s.target();
  co.timeout = timeout;
  co.chunk_bytes = 64 << 10;  // many messages per call through the proxy
  return Client(co);
}

// Bit-for-bit equal (floats included; empty vectors too).
template <class T>
bool SameBits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

template <class Pred>
bool WaitFor(Pred pred, std::chrono::milliseconds limit) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return pred();
}

class FrontTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    front_ = StartFront("suite").release();
    plain_ = new ServerProcess(ServerPath(), "cpu", {"--cpu-threads", "2"}, {}, LogPath("plain"));
  }
  static void TearDownTestSuite() {
    delete front_;
    delete plain_;
  }
  static ServerProcess* front_;
  static ServerProcess* plain_;
};
ServerProcess* FrontTest::front_ = nullptr;
ServerProcess* FrontTest::plain_ = nullptr;

TEST(WorkerArgs, DropTheFrontsOwnFlagsInBothForms) {
  const char* argv[] = {"gpuscan-server", "--address",        "0.0.0.0:1", "--engine=cuda", "--devices=0,1",
                        "--max-lanes",    "8",                "--tls-cert", "c.pem",        "--isolate-devices",
                        "on",             "--metrics-address=:9",         "--streams",    "4"};
  const std::vector<std::string> got = server::WorkerArgs(14, argv);
  EXPECT_EQ(got, (std::vector<std::string>{"--engine=cuda", "--max-lanes", "8", "--streams", "4"}));
  const char* env[] = {"GPUSCAN_ADDRESS=x", "GPUSCAN_STREAMS=4", "PATH=/bin", "GPUSCAN_TLS_KEY=k", nullptr};
  EXPECT_EQ(server::WorkerEnv(env), (std::vector<std::string>{"GPUSCAN_STREAMS=4", "PATH=/bin"}));
}

TEST_F(FrontTest, InfoListsBothDevicesAndCallsSpreadOverThem) {
  Client client = ClientOf(*front_);
  EXPECT_EQ(client.Health(""), "SERVING");
  EXPECT_EQ(client.Health("gpuscan.v1.GpuScan"), "SERVING");
  GPUSCAN_SEEDED_RNG(rng);
  const auto x = testing::RandomInput<int32_t, ops::Sum<int32_t>>(100'003, rng);
  const auto want = testing::ScanRef<int32_t, ops::Sum<int32_t>>(x, false);
  std::set<std::string> devices;
  for (int i = 0; i < 6; ++i) {
    const ScanResult<int32_t> r = client.Scan(x);
    ASSERT_EQ(r.values, want);
    devices.insert(r.timing.device.substr(0, 3));
  }
  EXPECT_EQ(devices, (std::set<std::string>{"0: ", "1: "}));
  const v1::ServerInfo info = client.Info();
  EXPECT_EQ(info.engine(), "cpu");
  EXPECT_FALSE(info.operations().empty());
}

// Same bits as a plain server for every operation, at sizes around the client's chunks.
TEST_F(FrontTest, EveryOperationGivesThePlainServersBits) {
  Client front = ClientOf(*front_);
  Client plain = ClientOf(*plain_);
  GPUSCAN_SEEDED_RNG(rng);
  for (const size_t n : {size_t{0}, size_t{1}, size_t{16383}, size_t{16384}, size_t{16385}, size_t{300'007}}) {
    SCOPED_TRACE(n);
    const auto f = testing::RandomInput<float, ops::Sum<float>>(n, rng);
    const auto i = testing::RandomInput<int32_t, ops::Sum<int32_t>>(n, rng);
    std::vector<int32_t> keys(n);
    for (size_t k = 0; k < n; ++k) keys[k] = static_cast<int32_t>(k / 97);
    EXPECT_TRUE(SameBits(front.Scan(f).values, plain.Scan(f).values));
    EXPECT_EQ(front.Reduce(f, v1::OPERATOR_SUM).value, plain.Reduce(f, v1::OPERATOR_SUM).value);
    CompactOptions keep;
    keep.predicate.set_op(v1::PREDICATE_OP_GT);
    keep.predicate.mutable_threshold()->set_int_value(0);
    keep.output = v1::COMPACT_OUTPUT_VALUES_AND_INDICES;
    const auto fc = front.Compact(i, keep), pc = plain.Compact(i, keep);
    EXPECT_EQ(fc.values, pc.values);
    EXPECT_EQ(fc.indices, pc.indices);
    EXPECT_TRUE(SameBits(front.SegmentedScan(f, keys).values, plain.SegmentedScan(f, keys).values));
    const auto fr = front.ReduceByKey(f, keys, v1::OPERATOR_SUM), pr = plain.ReduceByKey(f, keys, v1::OPERATOR_SUM);
    EXPECT_EQ(fr.keys, pr.keys);
    EXPECT_TRUE(SameBits(fr.values, pr.values));
    EXPECT_EQ(front.Sort(f.data(), n).keys.size(), n);
    EXPECT_TRUE(SameBits(front.Sort(f.data(), n).keys, plain.Sort(f.data(), n).keys));
    HistogramBins bins;
    bins.bins = 17;
    bins.lo = -1;
    bins.hi = 1;
    EXPECT_EQ(front.Histogram(f, bins).counts, plain.Histogram(f, bins).counts);
    if (n % 7 == 0 || n == 300'007) {
      const size_t cols = n == 300'007 ? 300'007 / 7 : 1, rows = n / std::max<size_t>(cols, 1);
      if (rows * cols == n && n > 0) {
        EXPECT_TRUE(SameBits(front.Scan2D(f.data(), rows, cols).values,
                                       plain.Scan2D(f.data(), rows, cols).values));
      }
    }
  }
}

TEST_F(FrontTest, StripedLanesJoinOnOneWorker) {
  Client client = ClientOf(*front_);
  GPUSCAN_SEEDED_RNG(rng);
  // Lanes that reach the front at once (short arrays: every lane is a header and little else)
  // still meet on one worker.
  for (int i = 0; i < 30; ++i) {
    const auto x = testing::RandomInput<int32_t, ops::Sum<int32_t>>(100 + i, rng);
    ScanOptions so;
    so.lanes = 8;
    ASSERT_EQ(client.Scan(x, so).values, (testing::ScanRef<int32_t, ops::Sum<int32_t>>(x, false))) << i;
  }
  for (const uint32_t lanes : {2u, 4u}) {
    for (const size_t n : {size_t{100}, size_t{16384 * 5 + 3}, size_t{1'000'003}}) {
      SCOPED_TRACE(std::to_string(lanes) + " lanes, n=" + std::to_string(n));
      const auto x = testing::RandomInput<int32_t, ops::Sum<int32_t>>(n, rng);
      ScanOptions so;
      so.lanes = lanes;
      EXPECT_EQ(client.Scan(x, so).values, (testing::ScanRef<int32_t, ops::Sum<int32_t>>(x, false)));
      EXPECT_EQ(client.Reduce(x, v1::OPERATOR_SUM, lanes).value,
                (testing::ScanRef<int32_t, ops::Sum<int32_t>>(x, false)).back());
    }
  }
}

TEST_F(FrontTest, BadInputDeadlinesAndCancellationPassThrough) {
  Client client = ClientOf(*front_);
  // The worker's own validation message comes back unchanged.
  v1::ScanHeader bad;
  bad.set_dtype(static_cast<v1::DType>(99));
  bad.set_op(v1::OPERATOR_SUM);
  std::vector<int32_t> x(1000, 1);
  try {
    size_t sent = 0;
    client.ScanStream(
        bad,
        [&](void* buf, size_t max) {
          const size_t n = std::min(max, x.size() * 4 - sent);
          std::memcpy(buf, reinterpret_cast<const char*>(x.data()) + sent, n);
          sent += n;
          return n;
        },
        [](const void*, size_t) {});
    FAIL() << "accepted dtype 99";
  } catch (const RpcError& e) {
    EXPECT_EQ(e.code(), grpc::StatusCode::INVALID_ARGUMENT) << e.what();
    EXPECT_NE(e.message().find("dtype"), std::string::npos) << e.message();
  }
  // Benchmark on the cpu engine: the worker's answer; a device the front does not serve: its own.
  v1::BenchmarkRequest bench;
  bench.add_devices(5);
  try {
    client.Benchmark(bench, [](const v1::BenchmarkRow&) {});
    FAIL() << "benchmarked device 5";
  } catch (const RpcError& e) {
    EXPECT_EQ(e.code(), grpc::StatusCode::INVALID_ARGUMENT) << e.what();
    EXPECT_NE(e.message().find("devices[0]=5 is not a device this server serves"), std::string::npos) << e.message();
  }
  try {
    client.Benchmark(v1::BenchmarkRequest(), [](const v1::BenchmarkRow&) {});
    FAIL() << "benchmarked the cpu engine";
  } catch (const RpcError& e) {
    EXPECT_EQ(e.code(), grpc::StatusCode::FAILED_PRECONDITION) << e.what();
  }
  // A deadline too short for the call.
  Client hurried = ClientOf(*front_, std::chrono::milliseconds(1));
  std::vector<int32_t> big(8 << 20, 3);
  try {
    hurried.Scan(big);
    FAIL() << "a 32 MiB scan within 1 ms";
  } catch (const RpcError& e) {
    EXPECT_EQ(e.code(), grpc::StatusCode::DEADLINE_EXCEEDED) << e.what();
  }
  // Cancelled mid-call: CANCELLED soon, and the front serves on.
  Client patient = ClientOf(*front_);
  std::atomic<bool> over{false};
  std::thread cancel([&] {
    while (!over) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      patient.CancelCalls();
    }
  });
  const auto t0 = std::chrono::steady_clock::now();
  try {
    for (int i = 0; i < 50; ++i) patient.Scan(big);
    ADD_FAILURE() << "50 scans of 32 MiB outran the cancels";
  } catch (const RpcError& e) {
    EXPECT_EQ(e.code(), grpc::StatusCode::CANCELLED) << e.what();
  }
  over = true;
  cancel.join();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));
  EXPECT_EQ(client.Scan(x).values.back(), 1000);
}

// A worker that dies is drained: calls go to the other and health stays SERVING; it is
// started again and serves again. SIGTERM ends the front and its workers.
TEST(FrontWorkers, KilledWorkerIsDrainedAndRestarted) {
  auto front = StartFront("kill");
  Client client = ClientOf(*front);
  GPUSCAN_SEEDED_RNG(rng);
  const auto x = testing::RandomInput<int32_t, ops::Sum<int32_t>>(50'000, rng);
  const auto want = testing::ScanRef<int32_t, ops::Sum<int32_t>>(x, false);
  const pid_t victim = soak::WorkerPid(front->pid(), 1);
  ASSERT_GT(victim, 0) << front->LogTail();
  ASSERT_GT(soak::WorkerPid(front->pid(), 0), 0);
  ASSERT_EQ(::kill(victim, SIGKILL), 0);
  int failures = 0;
  for (int i = 0; i < 20; ++i) {
    try {
      const ScanResult<int32_t> r = client.Scan(x);
      EXPECT_EQ(r.values, want);
    } catch (const RpcError& e) {
      EXPECT_EQ(e.code(), grpc::StatusCode::UNAVAILABLE) << e.what();
      ++failures;  // only while the front has not noticed yet
    }
    EXPECT_EQ(client.Health(""), "SERVING");
  }
  EXPECT_LE(failures, 1);  // the call that found it gone (the front then stops routing there)
  // Back within a few seconds, with a new process; calls reach it again.
  ASSERT_TRUE(WaitFor(
      [&] {
        const pid_t p = soak::WorkerPid(front->pid(), 1);
        if (p == 0 || p == victim) return false;
        std::set<std::string> seen;
        for (int i = 0; i < 4; ++i) {
          try {
            seen.insert(client.Scan(x).timing.device.substr(0, 3));
          } catch (const RpcError&) {
          }
        }
        return seen.count("1: ") > 0;
      },
      std::chrono::seconds(20)))
      << front->LogTail();
  const std::string log = front->LogTail(20000);
  EXPECT_NE(log.find("device 1"), std::string::npos) << log;
  EXPECT_NE(log.find("killed by signal"), std::string::npos) << log;
  const pid_t w0 = soak::WorkerPid(front->pid(), 0), w1 = soak::WorkerPid(front->pid(), 1);
  std::string why;
  EXPECT_TRUE(front->Stop(std::chrono::seconds(15), &why)) << why;
  EXPECT_TRUE(WaitFor([&] { return ::kill(w0, 0) != 0 && ::kill(w1, 0) != 0; }, std::chrono::seconds(5)));
}

// The front's /metrics: calls counted by the device that ran them, each device's health, and the
// stages from the workers' Timing.
TEST(FrontWorkers, MetricsNameTheDevices) {
  const int port = soak::FreePort();
  auto front = StartFront("metrics", {"--metrics-address", "127.0.0.1:" + std::to_string(port)});
  Client client = ClientOf(*front);
  GPUSCAN_SEEDED_RNG(rng);
  const auto x = testing::RandomInput<int32_t, ops::Sum<int32_t>>(10'000, rng);
  for (int i = 0; i < 4; ++i) client.Scan(x);
  // A call is counted at its OnDone, which may come just after the client has its answer.
  testing::HttpResponse r;
  ASSERT_TRUE(WaitFor(
      [&] {
        r = testing::HttpGet(port, "/metrics");
        return r.status == 200 && testing::PromText(r.body).Find("gpuscan_requests_in_flight").value_or(1) == 0;
      },
      std::chrono::seconds(10)))
      << r.status << " " << r.headers;
  const testing::PromText t(r.body);
  double calls = 0;
  for (const std::string slot : {"0", "1"}) {
    const std::string device = slot + ": cpu";
    EXPECT_EQ(t.Find("gpuscan_device_healthy", {{"device", device}}).value_or(-1), 1) << r.body;
    const double on_device = t.Sum("gpuscan_requests_total", {{"op", "scan"}, {"device", device}, {"status", "OK"}});
    EXPECT_GE(on_device, 1) << r.body;
    calls += on_device;
  }
  EXPECT_EQ(calls, 4) << r.body;
  EXPECT_EQ(t.Sum("gpuscan_requests_total", {{"op", "scan"}, {"dtype", "int32"}}), 4) << r.body;
  EXPECT_GE(t.Sum("gpuscan_stage_duration_seconds_count", {{"op", "scan"}, {"stage", "kernel"}}), 4) << r.body;

  // A striped call cancelled mid-way: every lane's worker call ends CANCELLED, none as a
  // half-closed lane with chunks missing (INVALID_ARGUMENT), which is what a worker reports
  // when the front passes a cancel on as the end of the input.
  ClientOptions co;
  co.target = front->target();
  co.chunk_bytes = 4096;  // many chunks: the cancel lands mid-array
  Client striped(co);
  const auto big = testing::RandomInput<int32_t, ops::Sum<int32_t>>(4 << 20, rng);
  for (int round = 0; round < 12; ++round) {
    std::atomic<bool> over{false};
    std::thread cancel([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(20 + 4 * round));
      striped.CancelCalls();
      over = true;
    });
    ScanOptions so;
    so.lanes = 4;
    try {
      striped.Scan(big, so);
    } catch (const RpcError& e) {
      EXPECT_EQ(e.code(), grpc::StatusCode::CANCELLED) << e.what();
    }
    cancel.join();
  }
  testing::PromText after{std::string()};
  ASSERT_TRUE(WaitFor(
      [&] {
        after = testing::PromText(testing::HttpGet(port, "/metrics").body);
        return after.Find("gpuscan_requests_in_flight").value_or(1) == 0;
      },
      std::chrono::seconds(10)));
  EXPECT_EQ(after.Sum("gpuscan_requests_total", {{"op", "scan"}, {"status", "INVALID_ARGUMENT"}}), 0);
}

}  // namespace
}  // namespace gpuscan
