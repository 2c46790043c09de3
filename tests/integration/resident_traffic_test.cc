// Resident traffic past the budget: 8 threads of 4 tenants put, scan (kept and streamed back),
// reduce, get and drop random int32 arrays whose total is 3x the budget, while a sampler reads
// the server's accounts. Every result equals the host's own fold, the budget is never passed
// (spill makes room), each tenant sees only its own arrays, and nothing is left counted at the end.
#include <atomic>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "resident_fixture.h"

namespace gpuscan::testing {
namespace {

using namespace resident;  // NOLINT: the fixture's helpers

constexpr uint64_t kBudget = 1 << 20;
constexpr int kThreads = 8, kTenants = 4, kStepsPerThread = 100;

std::vector<int32_t> Ints(const std::string& bytes) {
  std::vector<int32_t> v(bytes.size() / 4);
  if (!v.empty()) std::memcpy(v.data(), bytes.data(), bytes.size());
  return v;
}

// The inclusive int32 sum scan, wrapping as the server's does.
std::string Prefix(const std::string& bytes) {
  std::vector<int32_t> v = Ints(bytes);
  uint32_t acc = 0;
  for (int32_t& x : v) x = static_cast<int32_t>(acc += static_cast<uint32_t>(x));
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4);
}

struct Held {
  std::string id, data;  // the array's id and what it must hold
};

TEST(ResidentTraffic, ThreeTimesTheBudgetFromEightThreadsAndFourTenantsStaysRightAndWithinIt) {
  server::ServerOptions o = ResidentOptions(kBudget);
  o.spill_bytes = 2 * kBudget;
  TestServer server(o);
  std::atomic<bool> done{false};
  std::atomic<uint64_t> worst_used{0}, worst_held{0}, results{0}, refused_puts{0};
  std::thread sampler([&] {
    auto stub = server.stub();
    while (!done) {
      grpc::ClientContext ctx;
      v1::ListArraysResponse list;
      if (stub->ListArrays(&ctx, {}, &list).ok()) {
        for (auto [worst, now] : {std::pair{&worst_used, list.used_bytes()},
                                  std::pair{&worst_held, list.used_bytes() + list.spilled_bytes()}}) {
          uint64_t w = worst->load();
          while (now > w && !worst->compare_exchange_weak(w, now)) {
          }
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  });
  std::vector<std::string> failures(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto stub = server.stub();
      const std::string tenant = "tenant-" + std::to_string(t % kTenants);
      std::mt19937 rng(1000 + t);
      std::vector<Held> mine;
      auto fail = [&](const std::string& why) {
        if (failures[t].empty()) failures[t] = why;
      };
      auto drop = [&](size_t i) {
        grpc::ClientContext ctx;
        Tenant(&ctx, tenant);
        v1::DropArrayRequest req;
        req.set_id(mine[i].id);
        v1::DropArrayResponse resp;
        if (!stub->DropArray(&ctx, req, &resp).ok()) fail("drop of a held array failed");
        mine.erase(mine.begin() + static_cast<long>(i));
      };
      for (int step = 0; step < kStepsPerThread && failures[t].empty(); ++step) {
        const int what = mine.empty() ? 0 : static_cast<int>(rng() % 6);
        if (what == 0) {  // put: 8-48 KiB (8 calls never hold the budget); past it and the spill room, drop the oldest
          const uint64_t n = (8 + rng() % 41) << 8;
          Held h{"", RandomArray(v1::DTYPE_INT32, n, static_cast<uint32_t>(rng()))};
          v1::ArrayInfo info;
          const grpc::Status s = Put(*stub, v1::DTYPE_INT32, h.data, &info, tenant);
          if (s.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
            ++refused_puts;
            if (!mine.empty()) drop(0);
            continue;
          }
          if (!s.ok()) fail("put: " + s.error_message());
          h.id = info.id();
          mine.push_back(std::move(h));
          continue;
        }
        const size_t i = rng() % mine.size();
        v1::ScanHeader scan;
        scan.set_dtype(v1::DTYPE_INT32);
        scan.set_op(v1::OPERATOR_SUM);
        scan.mutable_resident()->set_values(mine[i].id);
        std::string out;
        if (what == 1) {  // scan, streamed back
          const grpc::Status s = Scan(*stub, scan, nullptr, &out, nullptr, tenant);
          if (!s.ok()) fail("scan: " + s.error_message());
          if (s.ok() && out != Prefix(mine[i].data)) fail("a scan's result differs from the host's");
        } else if (what == 2) {  // scan, kept: a new array to hold
          scan.mutable_resident()->set_keep(true);
          v1::ArrayInfo kept;
          const grpc::Status s = Scan(*stub, scan, nullptr, &out, &kept, tenant);
          if (s.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) continue;  // no room to keep it
          if (!s.ok()) fail("kept scan: " + s.error_message());
          if (s.ok()) mine.push_back({kept.id(), Prefix(mine[i].data)});
        } else if (what == 3) {  // reduce
          v1::ReduceHeader red;
          red.set_dtype(v1::DTYPE_INT32);
          red.set_op(v1::OPERATOR_SUM);
          red.mutable_resident()->set_values(mine[i].id);
          std::string raw;
          const grpc::Status s = Reduce(*stub, red, nullptr, &raw, tenant);
          const std::string p = Prefix(mine[i].data);
          if (!s.ok()) fail("reduce: " + s.error_message());
          if (s.ok() && raw != p.substr(p.size() - 4)) fail("a reduce differs from the host's");
        } else if (what == 4) {  // get
          const grpc::Status s = Get(*stub, mine[i].id, &out, tenant);
          if (!s.ok()) fail("get: " + s.error_message());
          if (s.ok() && out != mine[i].data) fail("an array read back differs from what it must hold");
        } else {
          drop(i);
          continue;
        }
        ++results;
      }
      // Another tenant's ids are not found.
      if (!mine.empty()) {
        std::string out;
        const grpc::Status s = Get(*stub, mine[0].id, &out, tenant + "-other");
        if (s.error_code() != grpc::StatusCode::NOT_FOUND) fail("another tenant read an array");
      }
      while (!mine.empty()) drop(0);
    });
  }
  for (auto& th : threads) th.join();
  done = true;
  sampler.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(failures[t], "") << "thread " << t;
  EXPECT_LE(worst_used.load(), kBudget) << "the budget was passed";
  EXPECT_GT(worst_held.load(), 2 * kBudget) << "the traffic never went far past the budget";
  EXPECT_GT(results.load(), uint64_t{kThreads * kStepsPerThread / 2});
  // Nothing left: every array dropped, no bytes counted on the device or spilled.
  for (int k = 0; k < kTenants; ++k) {
    grpc::ClientContext ctx;
    Tenant(&ctx, "tenant-" + std::to_string(k));
    v1::ListArraysResponse list;
    ASSERT_TRUE(server.stub()->ListArrays(&ctx, {}, &list).ok());
    EXPECT_EQ(list.arrays_size(), 0);
    EXPECT_EQ(list.tenant_bytes(), 0u);
    EXPECT_EQ(list.used_bytes(), 0u);
    EXPECT_EQ(list.spilled_bytes(), 0u);
  }
  std::printf("traffic: %llu results, %llu puts refused, at most %llu bytes on the device, %llu held\n",
              static_cast<unsigned long long>(results.load()), static_cast<unsigned long long>(refused_puts.load()),
              static_cast<unsigned long long>(worst_used.load()), static_cast<unsigned long long>(worst_held.load()));
}

}  // namespace
}  // namespace gpuscan::testing
