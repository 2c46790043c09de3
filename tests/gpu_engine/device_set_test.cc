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

// Host memory registered through the set (the server's payload pool, a shared-memory region)
// is registered on every device: each copies straight from and to it, not through staging,
// and scans right from it; releasing the handle ends that on all of them.
TEST(CudaDeviceSet, RegistrationReachesEveryDevice) {
  for (const std::vector<int>& devices : {std::vector<int>{}, std::vector<int>{0, 0}}) {
    std::string skip;
    auto eng = Cuda(devices, &skip);
    if (!eng) GTEST_SKIP() << "no CUDA device: " << skip;
    auto* set = dynamic_cast<engine::DeviceSet*>(eng.get());
    std::vector<Engine*> each;
    for (size_t i = 0; set && i < set->size(); ++i) each.push_back(&set->device(i));
    if (!set) each.push_back(eng.get());  // one device: the plain engine
    SCOPED_TRACE(std::to_string(each.size()) + " engines");
    GPUSCAN_SEEDED_RNG(rng);
    const size_t n = (1 << 20) + 3, bytes = n * sizeof(int32_t);
    std::vector<int32_t> in = testing::RandomInput<int32_t, ops::Sum<int32_t>>(n, rng);
    std::vector<int32_t> out(n);
    const auto want = testing::ScanRef<int32_t, ops::Sum<int32_t>>(in, false);
    auto in_handle = eng->RegisterHost(in.data(), bytes, /*read_only=*/false);
    auto out_handle = eng->RegisterHost(out.data(), bytes, false);
    ASSERT_TRUE(in_handle && out_handle);
    EXPECT_TRUE(eng->registered(in.data(), bytes));
    for (Engine* e : each) {
      EXPECT_TRUE(e->registered(in.data(), bytes) && e->registered(out.data(), bytes)) << e->device_name();
      std::fill(out.begin(), out.end(), -1);
      StageTimes t;
      e->NewScan(ScanSpec{})->Process(in.data(), out.data(), n, t);
      EXPECT_TRUE(out == want) << e->device_name();
    }
    in_handle.reset();
    out_handle.reset();
    for (Engine* e : each) EXPECT_FALSE(e->registered(in.data(), bytes)) << e->device_name();
    EXPECT_FALSE(eng->registered(out.data(), bytes));
  }
}

}  // namespace
}  // namespace gpuscan::unit
