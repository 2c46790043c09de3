// Resident arrays past the budget (--spill-bytes): the least recently used arrays no call holds
// spill to host memory and come back, bit for bit, on their next use; the budget is never passed;
// past the budget and the spill room a Put fails naming both; the quota covers spilled bytes.
// Through the raw stub against an in-process server, and on a ResidentStore directly where a
// test must hold an array as a call does.
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "engine/cpu_engine.h"
#include "http_get.h"
#include "resident_fixture.h"
#include "service/resident_store.h"

namespace gpuscan::testing {
namespace {

using namespace resident;  // NOLINT: the fixture's helpers

constexpr uint64_t kArray = 32 << 10;  // bytes of each test array: two fill the budget
constexpr uint64_t kElements = kArray / 4;

server::ServerOptions SpillOptions(uint64_t spill_bytes, uint64_t quota = 0) {
  server::ServerOptions o = ResidentOptions(2 * kArray);
  o.spill_bytes = spill_bytes;
  o.tenant_quota_bytes = quota;
  return o;
}

server::ServerOptions WithMetrics(server::ServerOptions o) {
  o.metrics_address = "127.0.0.1:0";
  return o;
}

v1::ListArraysResponse List(v1::GpuScan::Stub& stub) {
  grpc::ClientContext ctx;
  v1::ListArraysResponse list;
  EXPECT_TRUE(stub.ListArrays(&ctx, {}, &list).ok());
  return list;
}

// Which of `ids` the list says are spilled, in their order.
std::vector<bool> Spilled(const v1::ListArraysResponse& list, const std::vector<std::string>& ids) {
  std::vector<bool> out;
  for (const std::string& id : ids) {
    bool spilled = false;
    for (const auto& a : list.arrays()) spilled |= a.id() == id && a.spilled();
    out.push_back(spilled);
  }
  return out;
}

class ResidentSpillTest : public ::testing::Test {
 protected:
  void PutAll(int n) {
    for (int i = 0; i < n; ++i) {
      data_.push_back(RandomArray(v1::DTYPE_INT32, kElements, 100 + i));
      v1::ArrayInfo info;
      ASSERT_TRUE(Put(*stub_, v1::DTYPE_INT32, data_.back(), &info).ok());
      ids_.push_back(info.id());
      EXPECT_LE(List(*stub_).used_bytes(), 2 * kArray) << "the budget was passed";
    }
  }
  TestServer server_{WithMetrics(SpillOptions(4 * kArray))};
  std::unique_ptr<v1::GpuScan::Stub> stub_ = server_.stub();
  std::vector<std::string> data_, ids_;
};

TEST_F(ResidentSpillTest, TheLeastRecentlyUsedSpillsAndComesBackOnItsNextUse) {
  PutAll(3);  // the third spills the first
  v1::ListArraysResponse list = List(*stub_);
  EXPECT_EQ(Spilled(list, ids_), (std::vector<bool>{true, false, false}));
  EXPECT_EQ(list.spilled_bytes(), kArray);
  EXPECT_EQ(list.spill_bytes(), 4 * kArray);
  EXPECT_EQ(list.used_bytes(), 2 * kArray);
  EXPECT_EQ(list.tenant_bytes(), 3 * kArray);
  for (const auto& a : list.arrays()) EXPECT_EQ(a.device(), a.spilled() ? "host (spilled)" : a.device());

  // Its next use brings it back (spilling the least recently used of the others) bit for bit.
  std::string got;
  ASSERT_TRUE(Get(*stub_, ids_[0], &got).ok());
  EXPECT_EQ(got, data_[0]);
  EXPECT_EQ(Spilled(List(*stub_), ids_), (std::vector<bool>{false, true, false}));

  // An operation on a spilled array equals the streamed call's.
  v1::ScanHeader h;
  h.set_dtype(v1::DTYPE_INT32);
  h.set_op(v1::OPERATOR_SUM);
  std::string streamed, resident_out;
  ASSERT_TRUE(Scan(*stub_, h, &data_[1], &streamed).ok());
  h.mutable_resident()->set_values(ids_[1]);
  ASSERT_TRUE(Scan(*stub_, h, nullptr, &resident_out).ok());
  EXPECT_EQ(resident_out, streamed);
  list = List(*stub_);
  EXPECT_EQ(Spilled(list, ids_), (std::vector<bool>{false, false, true}));
  EXPECT_LE(list.used_bytes(), 2 * kArray);

  const HttpResponse m = HttpGet(server_.metrics_port(), "/metrics");
  EXPECT_NE(m.body.find("gpuscan_resident_spills_total 3"), std::string::npos) << m.body;
  EXPECT_NE(m.body.find("gpuscan_resident_restores_total 2"), std::string::npos) << m.body;
  EXPECT_NE(m.body.find("gpuscan_resident_spilled_bytes " + std::to_string(kArray)), std::string::npos) << m.body;
}

TEST_F(ResidentSpillTest, DroppingASpilledArrayFreesItsHostMemory) {
  PutAll(3);
  v1::DropArrayRequest req;
  req.set_id(ids_[0]);
  v1::DropArrayResponse resp;
  grpc::ClientContext ctx;
  ASSERT_TRUE(stub_->DropArray(&ctx, req, &resp).ok());
  const v1::ListArraysResponse list = List(*stub_);
  EXPECT_EQ(list.spilled_bytes(), 0u);
  EXPECT_EQ(list.tenant_bytes(), 2 * kArray);
}

TEST(ResidentSpillLimits, PastTheBudgetAndTheSpillRoomAPutFailsNamingBoth) {
  TestServer server(SpillOptions(kArray));
  auto stub = server.stub();
  const std::string data = RandomArray(v1::DTYPE_INT32, kElements, 7);
  std::vector<std::string> ids;
  for (int i = 0; i < 3; ++i) {
    v1::ArrayInfo info;
    ASSERT_TRUE(Put(*stub, v1::DTYPE_INT32, data, &info).ok()) << i;
    ids.push_back(info.id());
  }
  v1::ArrayInfo info;
  const grpc::Status s = Put(*stub, v1::DTYPE_INT32, data, &info);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(s.error_message().find("--resident-bytes"), std::string::npos) << s.error_message();
  EXPECT_NE(s.error_message().find("--spill-bytes"), std::string::npos) << s.error_message();
  // Every array put is still whole.
  for (const std::string& id : ids) {
    std::string got;
    ASSERT_TRUE(Get(*stub, id, &got).ok());
    EXPECT_EQ(got, data);
  }
}

TEST(ResidentSpillLimits, TheQuotaCountsSpilledBytesAndARestoreIsNeverRefusedByIt) {
  TestServer server(SpillOptions(4 * kArray, 2 * kArray + kArray / 2));
  auto stub = server.stub();
  const std::string a = RandomArray(v1::DTYPE_INT32, kElements, 1), b = RandomArray(v1::DTYPE_INT32, kElements, 2),
                    c = RandomArray(v1::DTYPE_INT32, kElements / 2, 3);
  v1::ArrayInfo ia, ib, ic;
  ASSERT_TRUE(Put(*stub, v1::DTYPE_INT32, a, &ia).ok());
  ASSERT_TRUE(Put(*stub, v1::DTYPE_INT32, b, &ib).ok());
  ASSERT_TRUE(Put(*stub, v1::DTYPE_INT32, c, &ic).ok());  // the budget is full: a spills
  v1::ListArraysResponse list = List(*stub);
  EXPECT_EQ(Spilled(list, {ia.id(), ib.id(), ic.id()}), (std::vector<bool>{true, false, false}));
  EXPECT_EQ(list.tenant_bytes(), list.tenant_quota_bytes());
  // At the quota: a restore is not refused by it (b spills for it), a new array is.
  std::string got;
  ASSERT_TRUE(Get(*stub, ia.id(), &got).ok());
  EXPECT_EQ(got, a);
  EXPECT_EQ(Spilled(List(*stub), {ia.id(), ib.id(), ic.id()}), (std::vector<bool>{false, true, false}));
  v1::ArrayInfo more;
  const grpc::Status s = Put(*stub, v1::DTYPE_INT32, c, &more);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(s.error_message().find("--tenant-quota-bytes"), std::string::npos) << s.error_message();
}

// On the store itself: an array a call holds (Find's) never spills, so a Put past the budget fails.
TEST(ResidentSpillStore, AnArrayACallHoldsNeverSpills) {
  engine::CpuEngine engine(1);
  server::ResidentOptions o;
  o.budget_bytes = 2 * kArray;
  o.spill_bytes = 4 * kArray;
  server::ResidentStore store(&engine, o);
  std::vector<std::string> ids;
  for (int i = 0; i < 2; ++i) {
    std::shared_ptr<engine::ResidentMemory> m;
    ASSERT_TRUE(store.Allocate("", kArray, &m).ok());
    const std::string bytes = RandomBytes(kArray, 10 + i);
    m->Write(0, bytes.data(), bytes.size());
    ids.push_back(store.Add("", v1::DTYPE_UINT8, kArray, std::move(m), 0, "").id());
  }
  std::shared_ptr<const server::ResidentArray> a0, a1;
  ASSERT_TRUE(store.Find("", ids[0], "id", &a0).ok());
  ASSERT_TRUE(store.Find("", ids[1], "id", &a1).ok());
  std::shared_ptr<engine::ResidentMemory> m;
  EXPECT_EQ(store.Allocate("", kArray, &m).error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(store.spills(), 0u);
  const std::byte* held = a0->memory->data();
  a1.reset();  // the call on the second ends: it may spill now, the first stays where it is
  ASSERT_TRUE(store.Allocate("", kArray, &m).ok());
  EXPECT_EQ(store.spills(), 1u);
  EXPECT_EQ(a0->memory->data(), held);
  EXPECT_EQ(store.used_bytes(), 2 * kArray);
  EXPECT_EQ(store.spilled_bytes(), kArray);
}

}  // namespace
}  // namespace gpuscan::testing
