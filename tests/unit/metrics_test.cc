// gpuscan::server::Metrics without a server: what one recorded call adds, where its latencies
// land among the buckets, and the gauges read at scrape time (admission, device memory, info).
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "engine/cpu_engine.h"
#include "metrics/metrics.h"
#include "prometheus_text.h"

namespace gpuscan {
namespace {

using server::CallRecord;
using server::Metrics;
using server::Stage;
using testing::PromLabels;
using testing::PromText;

// The CPU engine posing as one with a device, to see the device-memory gauges.
class FakeDeviceEngine final : public engine::CpuEngine {
 public:
  explicit FakeDeviceEngine(std::optional<engine::DeviceMemory> memory) : CpuEngine(1), memory_(memory) {}
  std::string device_name() const override { return "Fake GPU \"X\""; }  // a quote, to see escaping
  std::optional<engine::DeviceMemory> device_memory() const override { return memory_; }

 private:
  std::optional<engine::DeviceMemory> memory_;
};

CallRecord OkScan(double total_seconds) {
  CallRecord r;
  r.op = "scan";
  r.dtype = "int32";
  r.algorithm = "decoupled_lookback";
  r.device = "NVIDIA X";
  r.status = "OK";
  r.bytes_in = 4000;
  r.bytes_out = 4000;
  r.set(Stage::kKernel, 0.0);
  r.set(Stage::kTotal, total_seconds);
  return r;
}

TEST(MetricsTest, BucketsDoubleFrom50MicrosecondsPast100Seconds) {
  const std::vector<double> b = Metrics::StageBuckets();
  ASSERT_GE(b.size(), 2u);
  EXPECT_DOUBLE_EQ(b.front(), 50e-6);
  EXPECT_GE(b.back(), 100.0);
  EXPECT_LT(b.back(), 200.0);
  for (size_t i = 1; i < b.size(); ++i) EXPECT_DOUBLE_EQ(b[i], 2 * b[i - 1]);
}

TEST(MetricsTest, ASuccessfulCallCountsItsBytesAndStages) {
  engine::CpuEngine eng(1);
  Metrics m(eng, "9.9.9", {});
  m.CallStarted();
  EXPECT_EQ(PromText(m.Text()).Find("gpuscan_requests_in_flight"), 1.0);
  m.CallDone(OkScan(0.0003));

  const PromText t(m.Text());
  EXPECT_EQ(t.Find("gpuscan_requests_in_flight"), 0.0);
  EXPECT_EQ(t.Find("gpuscan_requests_total",
                   {{"op", "scan"}, {"dtype", "int32"}, {"algorithm", "decoupled_lookback"}, {"device", "NVIDIA X"}, {"status", "OK"}}),
            1.0);
  EXPECT_EQ(t.Find("gpuscan_received_bytes_total", {{"op", "scan"}}), 4000.0);
  EXPECT_EQ(t.Find("gpuscan_sent_bytes_total", {{"op", "scan"}}), 4000.0);
  // Only the stages the call set exist.
  EXPECT_EQ(t.Find("gpuscan_stage_duration_seconds_count", {{"op", "scan"}, {"stage", "total"}}), 1.0);
  EXPECT_EQ(t.Find("gpuscan_stage_duration_seconds_count", {{"op", "scan"}, {"stage", "kernel"}}), 1.0);
  EXPECT_EQ(t.All("gpuscan_stage_duration_seconds_count").size(), 2u);
  EXPECT_DOUBLE_EQ(t.Sum("gpuscan_stage_duration_seconds_sum", {{"op", "scan"}, {"stage", "total"}}), 0.0003);
  // 300 us lands in the (200 us, 400 us] bucket: cumulative counts 0 up to 200 us, 1 from 400 us.
  for (const auto& s : t.All("gpuscan_stage_duration_seconds_bucket", {{"op", "scan"}, {"stage", "total"}})) {
    const double le = std::strtod(s.labels.at("le").c_str(), nullptr);
    EXPECT_EQ(s.value, le < 0.0003 ? 0.0 : 1.0) << "le=" << s.labels.at("le");
  }
  // A 0 s stage (as the cpu engine's copies are) lands in the first bucket.
  for (const auto& s : t.All("gpuscan_stage_duration_seconds_bucket", {{"op", "scan"}, {"stage", "kernel"}})) {
    EXPECT_EQ(s.value, 1.0) << "le=" << s.labels.at("le");
  }
}

TEST(MetricsTest, AFailedCallCountsButAddsNoBytesNorLatency) {
  engine::CpuEngine eng(1);
  Metrics m(eng, "9.9.9", {});
  m.CallStarted();
  CallRecord r = OkScan(0.5);
  r.status = "CANCELLED";
  m.CallDone(r);
  m.CallStarted();
  CallRecord refused;
  refused.op = "reduce";
  refused.status = "INVALID_ARGUMENT";
  m.CallDone(refused);

  const PromText t(m.Text());
  EXPECT_EQ(t.Find("gpuscan_requests_total",
                   {{"op", "scan"}, {"dtype", "int32"}, {"algorithm", "decoupled_lookback"}, {"device", "NVIDIA X"}, {"status", "CANCELLED"}}),
            1.0);
  EXPECT_EQ(t.Find("gpuscan_requests_total",
                   {{"op", "reduce"}, {"dtype", ""}, {"algorithm", ""}, {"device", ""}, {"status", "INVALID_ARGUMENT"}}),
            1.0);
  EXPECT_EQ(t.Sum("gpuscan_received_bytes_total"), 0.0);
  EXPECT_EQ(t.Sum("gpuscan_sent_bytes_total"), 0.0);
  EXPECT_FALSE(t.Has("gpuscan_stage_duration_seconds_count"));
  EXPECT_EQ(t.Find("gpuscan_requests_in_flight"), 0.0);
}

TEST(MetricsTest, AdmissionGaugesAreReadAtScrapeTime) {
  engine::CpuEngine eng(1);
  uint64_t running = 3, queued = 7;
  Metrics m(eng, "9.9.9", {[&] { return running; }, [&] { return queued; }, {}, {}, {}, {}, {}});
  PromText t(m.Text());
  EXPECT_EQ(t.Find("gpuscan_admission_running"), 3.0);
  EXPECT_EQ(t.Find("gpuscan_admission_queued"), 7.0);
  running = 1;
  queued = 0;
  t = PromText(m.Text());
  EXPECT_EQ(t.Find("gpuscan_admission_running"), 1.0);
  EXPECT_EQ(t.Find("gpuscan_admission_queued"), 0.0);
}

TEST(MetricsTest, InfoNamesVersionEngineAndDevice) {
  engine::CpuEngine eng(1);
  Metrics m(eng, "1.2.3", {});
  const PromText t(m.Text());
  EXPECT_EQ(t.Find("gpuscan_info", {{"version", "1.2.3"}, {"engine", "cpu"}, {"device", eng.device_name()}}), 1.0);
}

TEST(MetricsTest, DeviceMemoryGaugesOnlyWhenTheEngineHasADevice) {
  {
    engine::CpuEngine eng(1);
    const PromText t(Metrics(eng, "0", {}).Text());
    EXPECT_FALSE(t.Has("gpuscan_device_memory_used_bytes"));
    EXPECT_FALSE(t.Has("gpuscan_device_memory_total_bytes"));
    EXPECT_FALSE(t.Has("gpuscan_device_memory_pool_bytes"));
  }
  {
    engine::DeviceMemory mem;
    mem.used_bytes = 5ull << 30;
    mem.total_bytes = 80ull << 30;
    mem.pool_reserved_bytes = 1ull << 30;
    FakeDeviceEngine eng(mem);
    const PromText t(Metrics(eng, "0", {}).Text());
    const PromLabels device = {{"device", "Fake GPU \"X\""}};
    EXPECT_EQ(t.Find("gpuscan_device_memory_used_bytes", device), double(5ull << 30));
    EXPECT_EQ(t.Find("gpuscan_device_memory_total_bytes", device), double(80ull << 30));
    EXPECT_EQ(t.Find("gpuscan_device_memory_pool_bytes", device), double(1ull << 30));
    EXPECT_EQ(t.Find("gpuscan_info", {{"version", "0"}, {"engine", "cpu"}, {"device", "Fake GPU \"X\""}}), 1.0);
  }
  {
    engine::DeviceMemory mem;  // an engine without a pool
    mem.used_bytes = 1;
    mem.total_bytes = 2;
    FakeDeviceEngine eng(mem);
    const PromText t(Metrics(eng, "0", {}).Text());
    EXPECT_TRUE(t.Has("gpuscan_device_memory_total_bytes"));
    EXPECT_FALSE(t.Has("gpuscan_device_memory_pool_bytes"));
  }
  {
    FakeDeviceEngine eng(std::nullopt);  // a device whose memory cannot be read now
    const PromText t(Metrics(eng, "0", {}).Text());
    EXPECT_FALSE(t.Has("gpuscan_device_memory_total_bytes"));
  }
}

}  // namespace
}  // namespace gpuscan
