// DeviceSet over CPU engines standing in for devices: calls spread over the least busy device,
// each session names its device, a device that turns unhealthy gets no more calls while the
// others serve, the set turns unhealthy only with the last, and open counts never leak. Then a
// server on a DeviceSet: Timing.device and the metrics name the device that ran each call.
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "engine/cpu_engine.h"
#include "engine/device_set.h"
#include "gpuscan/client.h"
#include "metrics/metrics.h"
#include "prometheus_text.h"
#include "gpuscan/kernels/operators.h"
#include "reference.h"
#include "service/resident_store.h"
#include "service/server.h"

namespace gpuscan::unit {
namespace {

using engine::CpuEngine;
using engine::DeviceSet;
using engine::Engine;
using engine::Error;
using engine::ErrorCode;

// A CPU engine whose health a test can take away, as a sticky CUDA error would: then it refuses
// new sessions with kUnavailable, as the CUDA engine does.
class FaultyCpu final : public Engine {
 public:
  std::string name() const override { return cpu_.name(); }
  std::string device_name() const override { return cpu_.device_name(); }
  std::vector<engine::DeviceInfo> devices() const override { return {engine::DeviceInfo{0, "fake", 9, 0, 1 << 20, 1, ""}}; }
  std::vector<engine::ScanAlgorithm> scan_algorithms() const override { return cpu_.scan_algorithms(); }
  std::vector<std::string> reduce_algorithms() const override { return cpu_.reduce_algorithms(); }
  std::vector<std::string> compact_algorithms() const override { return cpu_.compact_algorithms(); }
  bool healthy() const override { return !broken_; }
  std::string unhealthy_reason() const override { return broken_ ? "poisoned by the test" : ""; }
  void CheckHealth() override { ++checks_; }
  std::unique_ptr<engine::ScanSession> NewScan(const engine::ScanSpec& s) override { Refuse(); return cpu_.NewScan(s); }
  std::unique_ptr<engine::ReduceSession> NewReduce(const engine::ReduceSpec& s) override {
    Refuse();
    return cpu_.NewReduce(s);
  }
  std::unique_ptr<engine::CompactSession> NewCompact(const engine::CompactSpec& s) override {
    Refuse();
    return cpu_.NewCompact(s);
  }
  void Break() { broken_ = true; }
  int checks() const { return checks_; }

  // Host registrations, as the CUDA engine keeps them: a registered or adopted range is
  // copied from directly. `log` records the order of registrations and releases.
  std::shared_ptr<void> RegisterHost(void* data, uint64_t bytes, bool) override {
    if (refuse_register) return nullptr;
    return Hold(data, bytes, "register");
  }
  std::shared_ptr<void> AdoptRegistered(void* data, uint64_t bytes) override { return Hold(data, bytes, "adopt"); }
  bool registered(const void* p, uint64_t bytes) const override {
    std::lock_guard<std::mutex> lock(mu_);
    return held_.count({p, bytes}) > 0;
  }
  // Resident memory is the cpu engine's; the free bytes the set compares are the test's.
  std::unique_ptr<engine::ResidentMemory> AllocateResident(uint64_t bytes) override {
    return cpu_.AllocateResident(bytes);
  }
  std::unique_ptr<engine::ResidentMemory> AllocateSpill(uint64_t bytes) override { return cpu_.AllocateSpill(bytes); }
  std::optional<engine::DeviceMemory> device_memory() const override {
    engine::DeviceMemory m;
    m.total_bytes = 1 << 20;
    m.used_bytes = m.total_bytes - free_bytes;
    return m;
  }

  bool refuse_register = false;
  std::vector<std::string>* log = nullptr;
  uint64_t free_bytes = 1 << 19;  // what device_memory() reports free

 private:
  void Refuse() const {
    if (broken_) throw Error(ErrorCode::kUnavailable, "device poisoned by the test");
  }
  std::shared_ptr<void> Hold(void* data, uint64_t bytes, const std::string& how) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      held_.insert({data, bytes});
    }
    if (log) log->push_back(how);
    return std::shared_ptr<void>(data, [this, data, bytes, how](void*) {
      std::lock_guard<std::mutex> lock(mu_);
      held_.erase({data, bytes});
      if (log) log->push_back("release " + how);
    });
  }

  CpuEngine cpu_{1};
  std::atomic<bool> broken_{false};
  std::atomic<int> checks_{0};
  mutable std::mutex mu_;
  std::set<std::pair<const void*, uint64_t>> held_;
};

struct Set {
  FaultyCpu* dev[3];
  std::unique_ptr<DeviceSet> set;
};

Set MakeSet(size_t n) {
  Set s{};
  std::vector<std::unique_ptr<Engine>> engines;
  std::vector<std::string> labels;
  for (size_t i = 0; i < n; ++i) {
    auto e = std::make_unique<FaultyCpu>();
    s.dev[i] = e.get();
    engines.push_back(std::move(e));
    labels.push_back(std::to_string(i) + ": fake");
  }
  s.set = std::make_unique<DeviceSet>(std::move(engines), std::move(labels));
  return s;
}

std::vector<uint64_t> Open(const DeviceSet& set) {
  std::vector<uint64_t> v;
  for (const auto& d : set.device_status()) v.push_back(d.open_sessions.value_or(999));
  return v;
}

TEST(DeviceSet, SpreadsOpenCallsOverTheLeastBusyDevices) {
  Set s = MakeSet(3);
  EXPECT_EQ(s.set->device_name(), "3 devices: 0: fake, 1: fake, 2: fake");
  EXPECT_EQ(s.set->devices().size(), 3u);
  std::vector<std::unique_ptr<engine::ScanSession>> open;
  std::multiset<std::string> where;
  for (int i = 0; i < 6; ++i) {
    open.push_back(s.set->NewScan({}));
    where.insert(open.back()->device());
  }
  EXPECT_EQ(where, (std::multiset<std::string>{"0: fake", "0: fake", "1: fake", "1: fake", "2: fake", "2: fake"}));
  EXPECT_EQ(Open(*s.set), (std::vector<uint64_t>{2, 2, 2}));
  const std::string freed = open[0]->device();
  open[0].reset();  // that device now has the fewest: the next call goes there
  auto next = s.set->NewReduce({});
  EXPECT_EQ(next->device(), freed);
  EXPECT_EQ(Open(*s.set), (std::vector<uint64_t>{2, 2, 2}));
  open.clear();
  next.reset();
  EXPECT_EQ(Open(*s.set), (std::vector<uint64_t>{0, 0, 0}));
}

// Host memory registered through the set (the payload pool, shared-memory regions) is
// registered by the first device and adopted by the others, so every device copies from it
// directly; the handle drops the adoptions first. Nothing is adopted when registering fails.
TEST(DeviceSet, RegistrationReachesEveryDevice) {
  Set s = MakeSet(3);
  std::vector<std::string> log;
  for (FaultyCpu* d : s.dev) d->log = &log;
  std::vector<char> region(4096);
  auto handle = s.set->RegisterHost(region.data(), region.size(), false);
  ASSERT_TRUE(handle);
  EXPECT_EQ(handle.get(), region.data());
  for (FaultyCpu* d : s.dev) EXPECT_TRUE(d->registered(region.data(), region.size()));
  EXPECT_TRUE(s.set->registered(region.data(), region.size()));
  EXPECT_FALSE(s.set->registered(region.data(), region.size() + 1));
  handle.reset();
  for (FaultyCpu* d : s.dev) EXPECT_FALSE(d->registered(region.data(), region.size()));
  EXPECT_EQ(log, (std::vector<std::string>{"register", "adopt", "adopt", "release adopt", "release adopt",
                                           "release register"}));
  log.clear();
  s.dev[0]->refuse_register = true;  // not registered: every device stages it
  EXPECT_FALSE(s.set->RegisterHost(region.data(), region.size(), false));
  EXPECT_TRUE(log.empty());
  EXPECT_FALSE(s.set->registered(region.data(), region.size()));
}

TEST(DeviceSet, SessionsComputeLikeTheirDevice) {
  Set s = MakeSet(2);
  std::mt19937_64 rng(std::random_device{}());
  std::vector<int64_t> x(100'003);
  for (auto& v : x) v = (static_cast<int64_t>(rng() % 2001) - 1000) | 1;  // never zero
  for (int k = 0; k < 4; ++k) {  // both devices, in turn
    auto scan = s.set->NewScan({engine::DType::kInt64, engine::Op::kSum, k % 2 == 1});
    std::vector<int64_t> out(x.size());
    engine::StageTimes t;
    scan->Process(x.data(), out.data(), x.size(), t);
    EXPECT_EQ(out, (testing::ScanRef<int64_t, ops::Sum<int64_t>>(x, k % 2 == 1))) << scan->device();
    auto reduce = s.set->NewReduce({engine::DType::kInt64, engine::Op::kMax});
    reduce->Process(x.data(), x.size(), t);
    int64_t m = 0;
    reduce->Result(&m);
    EXPECT_EQ(m, *std::max_element(x.begin(), x.end()));
  }
}

TEST(DeviceSet, AnUnhealthyDeviceIsDrainedAndTheLastTakesTheSetDown) {
  Set s = MakeSet(2);
  s.dev[1]->Break();
  s.set->CheckHealth();
  EXPECT_EQ(s.dev[0]->checks(), 1);
  EXPECT_EQ(s.dev[1]->checks(), 1);
  EXPECT_TRUE(s.set->healthy());
  EXPECT_EQ(s.set->unhealthy_reason(), "1: fake: poisoned by the test");
  std::vector<std::unique_ptr<engine::CompactSession>> open;
  for (int i = 0; i < 5; ++i) {
    open.push_back(s.set->NewCompact({}));
    EXPECT_EQ(open.back()->device(), "0: fake");
  }
  const auto status = s.set->device_status();
  EXPECT_TRUE(status[0].healthy);
  EXPECT_FALSE(status[1].healthy);
  EXPECT_EQ(status[1].reason, "poisoned by the test");
  s.dev[0]->Break();
  EXPECT_FALSE(s.set->healthy());
  try {
    s.set->NewScan({});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnavailable);
  }
  open.clear();
  EXPECT_EQ(Open(*s.set), (std::vector<uint64_t>{0, 0}));  // the refused call left no count behind
}

TEST(DeviceSet, ARefusedSpecLeavesNoCount) {
  Set s = MakeSet(2);
  engine::ScanSpec bad;
  bad.algorithm = engine::ScanAlgorithm::kKoggeStone;  // the CPU engine has none
  for (int i = 0; i < 3; ++i) EXPECT_THROW(s.set->NewScan(bad), Error);
  EXPECT_EQ(Open(*s.set), (std::vector<uint64_t>{0, 0}));
}

TEST(DeviceSet, TheServerNamesTheDeviceOfEachCall) {
  Set s = MakeSet(2);
  DeviceSet* set = s.set.get();
  server::ServerOptions options;
  options.address = "127.0.0.1:0";
  auto srv = server::Server::Start(options, std::move(s.set));
  ClientOptions co;
  co.target = srv->address();
  co.timeout = std::chrono::seconds(30);
  Client client(co);
  std::set<std::string> devices;
  for (int i = 0; i < 6; ++i) {
    const auto r = client.Scan(std::vector<int32_t>{3, 1, 4, 1, 5});
    EXPECT_EQ(r.values, (std::vector<int32_t>{3, 4, 8, 9, 14}));
    devices.insert(r.timing.device);
  }
  EXPECT_EQ(devices, (std::set<std::string>{"0: fake", "1: fake"}));  // one at a time: turns alternate
  EXPECT_EQ(client.Info().devices_size(), 2);
  // A striped array is one session: its lanes run on one device.
  ClientOptions lo = co;
  lo.chunk_bytes = 64 << 10;
  Client striped(lo);
  std::mt19937_64 rng(std::random_device{}());
  std::vector<int32_t> x(1'000'003);
  for (auto& v : x) v = static_cast<int32_t>(rng() % 2001) - 1000;
  ScanOptions so;
  so.lanes = 4;
  const ScanResult<int32_t> lanes = striped.Scan(x, so);
  EXPECT_EQ(lanes.values, (testing::ScanRef<int32_t, ops::Sum<int32_t>>(x, false)));
  EXPECT_TRUE(lanes.timing.device == "0: fake" || lanes.timing.device == "1: fake") << lanes.timing.device;
  EXPECT_EQ(lanes.timing.chunks, (x.size() * 4 + lo.chunk_bytes - 1) / lo.chunk_bytes);
  for (const auto& d : set->device_status()) EXPECT_EQ(d.open_sessions.value_or(99), 0u) << d.device;
  // The scrape: one sample per device.
  server::Metrics metrics(*set, "9.9.9", {});
  auto held = set->NewScan({});
  server::CallRecord r;
  r.op = "scan";
  r.dtype = "int32";
  r.algorithm = held->algorithm();
  r.device = held->device();
  r.status = "OK";
  metrics.CallDone(r);
  const testing::PromText t(metrics.Text());
  EXPECT_EQ(t.Sum("gpuscan_requests_total", {{"device", held->device()}}), 1.0);
  EXPECT_EQ(t.Find("gpuscan_device_healthy", {{"device", "1: fake"}}), 1.0);
  EXPECT_EQ(t.Sum("gpuscan_device_calls"), 1.0);
  EXPECT_EQ(t.Find("gpuscan_device_calls", {{"device", held->device()}}), 1.0);
  held.reset();
  srv->Shutdown();
}

// A spilled array comes back to the device it left, not to the freest one: the arrays a call reads
// together were put beside each other and must stay on one device (a call reads one device).
TEST(DeviceSet, ASpilledArrayComesBackToItsDevice) {
  Set s = MakeSet(2);
  s.dev[0]->free_bytes = 900;
  s.dev[1]->free_bytes = 100;
  server::ResidentOptions o;
  o.budget_bytes = 2000;
  o.spill_bytes = 10000;
  server::ResidentStore store(s.set.get(), o);
  std::shared_ptr<engine::ResidentMemory> m;
  ASSERT_TRUE(store.Allocate("t", 1000, &m).ok());
  const v1::ArrayInfo first = store.Add("t", v1::DTYPE_INT32, 250, std::move(m), 0, "");
  EXPECT_EQ(first.device(), "0: fake");
  engine::Engine* home = nullptr;
  {
    std::shared_ptr<const server::ResidentArray> a;
    ASSERT_TRUE(store.Find("t", first.id(), "id", &a).ok());
    home = a->memory->engine;
  }
  s.dev[1]->free_bytes = 950;  // device 1 is the freest from now
  for (int i = 0; i < 2; ++i) {  // the second spills the first, the least recently used
    ASSERT_TRUE(store.Allocate("t", 1000, &m).ok());
    store.Add("t", v1::DTYPE_INT32, 250, std::move(m), 0, "");
  }
  ASSERT_EQ(store.spills(), 1u);
  std::shared_ptr<const server::ResidentArray> back;
  ASSERT_TRUE(store.Find("t", first.id(), "id", &back).ok());
  EXPECT_EQ(store.restores(), 1u);
  EXPECT_EQ(back->memory->device, "0: fake");
  EXPECT_EQ(back->memory->engine, home);  // sessions on it come from that device
}

}  // namespace
}  // namespace gpuscan::unit
