// The CUDA engine as a DeviceSet: every device of the machine (--devices all), and two engines
// on device 0 (a set on a one-GPU machine). Concurrent sessions spread over the engines, each
// computes right, and the open counts return to zero.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <thread>
#include <vector>

#include "engine/device_set.h"
#include "engine/engine.h"
#include "engine_runner.h"

namespace gpuscan::unit {
namespace {

std::unique_ptr<Engine> Cuda(std::vector<int> devices, std::string* skip) {
  engine::EngineOptions o;
  o.kind = engine::EngineKind::kCuda;
  o.devices = std::move(devices);
  try {
    return engine::MakeEngine(o, nullptr);
  } catch (const engine::Error& e) {
    *skip = e.what();
    return nullptr;
  }
}

// `sessions` scans held open at once (so each goes to the least busy engine), each checked.
std::multiset<std::string> RunConcurrentScans(Engine& eng, int sessions) {
  GPUSCAN_SEEDED_RNG(rng);
  const std::vector<int32_t> in = testing::RandomInput<int32_t, ops::Sum<int32_t>>((3 << 20) + 7, rng);
  const std::vector<int32_t> want = testing::ScanRef<int32_t, ops::Sum<int32_t>>(in, false);
  std::vector<std::unique_ptr<engine::ScanSession>> open;
  std::multiset<std::string> where;
  for (int i = 0; i < sessions; ++i) {
    open.push_back(eng.NewScan(ScanSpec{}));
    where.insert(open.back()->device());
  }
  std::vector<std::thread> threads;
  std::vector<std::vector<int32_t>> outs(sessions, std::vector<int32_t>(in.size()));
  for (int i = 0; i < sessions; ++i) {
    threads.emplace_back([&, i] {
      StageTimes t;
      open[i]->Process(in.data(), outs[i].data(), in.size(), t);
    });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < sessions; ++i) EXPECT_TRUE(outs[i] == want) << "session " << i << " on " << open[i]->device();
  return where;
}

TEST(CudaDeviceSet, EveryDeviceServesCalls) {
  std::string skip;
  auto eng = Cuda({}, &skip);
  if (!eng) GTEST_SKIP() << "no CUDA device: " << skip;
  const size_t n = eng->devices().size();
  const std::multiset<std::string> where = RunConcurrentScans(*eng, static_cast<int>(2 * n));
  if (n == 1) {
    EXPECT_EQ(where.count(""), 2u);  // one device: the plain engine, no set
    return;
  }
  for (const auto& d : eng->device_status()) EXPECT_EQ(where.count(d.device), 2u) << d.device;
  for (const auto& d : eng->device_status()) EXPECT_EQ(d.open_sessions.value_or(99), 0u) << d.device;
}

TEST(CudaDeviceSet, TwoEnginesOnOneDevice) {
  std::string skip;
  auto eng = Cuda({0, 0}, &skip);
  if (!eng) GTEST_SKIP() << "no CUDA device: " << skip;
  ASSERT_EQ(eng->device_status().size(), 2u);
  EXPECT_EQ(eng->devices().size(), 2u);
  const std::multiset<std::string> where = RunConcurrentScans(*eng, 4);
  EXPECT_EQ(where.size(), 4u);
  EXPECT_EQ(where.count(eng->device_status()[0].device), 4u);  // both named "0: <name>"
  EXPECT_TRUE(eng->healthy());
}

}  // namespace
}  // namespace gpuscan::unit
