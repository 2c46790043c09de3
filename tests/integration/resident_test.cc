// Resident arrays (PutArray, GetArray, DropArray, ListArrays, header.resident of Scan and Reduce),
// through the raw stub against an in-process server: every result bit for bit the streamed
// call's, on random data and sizes around the chunk boundaries; tenants, ttl, budget and quota.
#include <chrono>
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

class ResidentTest : public ::testing::Test {
 protected:
  TestServer server_{ResidentOptions()};
  std::unique_ptr<v1::GpuScan::Stub> stub_ = server_.stub();
};

TEST_F(ResidentTest, PutGetRoundTripsAroundChunkBoundaries) {
  uint32_t seed = 1;
  for (uint64_t n : {0ull, 1ull, 1023ull, 1024ull, 1025ull, 4095ull, 4096ull, 10007ull}) {
    for (bool declare : {true, false}) {
      const std::string data = RandomArray(v1::DTYPE_INT32, n, seed++);
      v1::ArrayInfo info;
      ASSERT_TRUE(Put(*stub_, v1::DTYPE_INT32, data, &info, "", declare).ok()) << n;
      EXPECT_EQ(info.id().size(), 24u);
      EXPECT_EQ(info.element_count(), n);
      EXPECT_EQ(info.bytes(), n * 4);
      EXPECT_EQ(info.label(), "test");
      std::string back;
      ASSERT_TRUE(Get(*stub_, info.id(), &back).ok());
      EXPECT_EQ(back, data) << n;
      if (n > 10) {
        ASSERT_TRUE(Get(*stub_, info.id(), &back, "", 3, n - 10).ok());
        EXPECT_EQ(back, data.substr(12, (n - 10) * 4));
      }
    }
  }
}

TEST_F(ResidentTest, NarrowDtypesArePutAndGotAsTheyAre) {
  const std::string data = RandomBytes(2001 * 2, 7);  // one chunk of at most kChunk
  v1::ArrayInfo info;
  grpc::ClientContext ctx;
  auto writer = stub_->PutArray(&ctx, &info);
  v1::PutArrayRequest req;
  req.mutable_header()->set_dtype(v1::DTYPE_FLOAT16);
  req.set_data(data);  // the header's request may carry data too
  writer->Write(req);
  writer->WritesDone();
  ASSERT_TRUE(writer->Finish().ok());
  EXPECT_EQ(info.element_count(), 2001u);
  std::string back;
  ASSERT_TRUE(Get(*stub_, info.id(), &back).ok());
  EXPECT_EQ(back, data);
}

TEST_F(ResidentTest, ScanAndReduceOnResidentArraysEqualTheStreamedCallsBitForBit) {
  uint32_t seed = 100;
  for (v1::DType dtype : {v1::DTYPE_INT32, v1::DTYPE_INT64, v1::DTYPE_UINT32, v1::DTYPE_UINT64, v1::DTYPE_FLOAT32,
                          v1::DTYPE_FLOAT64}) {
    for (uint64_t n : {1ull, 1000ull, 1024ull, 5000ull, 70001ull}) {
      const std::string data = RandomArray(dtype, n, seed++);
      v1::ArrayInfo info;
      ASSERT_TRUE(Put(*stub_, dtype, data, &info).ok());
      for (v1::Operator op : {v1::OPERATOR_SUM, v1::OPERATOR_MAX, v1::OPERATOR_PRODUCT}) {
        for (v1::ScanKind kind : {v1::SCAN_KIND_INCLUSIVE, v1::SCAN_KIND_EXCLUSIVE}) {
          v1::ScanHeader h;
          h.set_dtype(dtype);
          h.set_op(op);
          h.set_kind(kind);
          std::string streamed, resident, kept_data;
          ASSERT_TRUE(Scan(*stub_, h, &data, &streamed).ok());
          h.mutable_resident()->set_values(info.id());
          ASSERT_TRUE(Scan(*stub_, h, nullptr, &resident).ok());
          EXPECT_EQ(resident, streamed) << v1::DType_Name(dtype) << " n=" << n << " op=" << op << " kind=" << kind;
          h.mutable_resident()->set_keep(true);
          v1::ArrayInfo kept;
          std::string none;
          ASSERT_TRUE(Scan(*stub_, h, nullptr, &none, &kept).ok());
          EXPECT_TRUE(none.empty());
          ASSERT_EQ(kept.element_count(), n);
          EXPECT_EQ(kept.dtype(), dtype);
          ASSERT_TRUE(Get(*stub_, kept.id(), &kept_data).ok());
          EXPECT_EQ(kept_data, streamed);
          v1::DropArrayRequest drop;
          drop.set_id(kept.id());
          v1::DropArrayResponse dropped;
          grpc::ClientContext dctx;
          ASSERT_TRUE(stub_->DropArray(&dctx, drop, &dropped).ok());
        }
        v1::ReduceHeader r;
        r.set_dtype(dtype);
        r.set_op(op);
        std::string streamed, resident;
        ASSERT_TRUE(Reduce(*stub_, r, &data, &streamed).ok());
        r.mutable_resident()->set_values(info.id());
        ASSERT_TRUE(Reduce(*stub_, r, nullptr, &resident).ok());
        EXPECT_EQ(resident, streamed) << v1::DType_Name(dtype) << " n=" << n << " op=" << op;
      }
    }
  }
}

TEST_F(ResidentTest, AChainOfKeptScansNeverLeavesTheServer) {
  const std::string data = RandomArray(v1::DTYPE_INT64, 9999, 5);
  v1::ArrayInfo a;
  ASSERT_TRUE(Put(*stub_, v1::DTYPE_INT64, data, &a).ok());
  v1::ScanHeader h;
  h.set_dtype(v1::DTYPE_INT64);
  h.set_op(v1::OPERATOR_SUM);
  h.mutable_resident()->set_values(a.id());
  h.mutable_resident()->set_keep(true);
  v1::ArrayInfo b, c;
  std::string none, twice, direct;
  ASSERT_TRUE(Scan(*stub_, h, nullptr, &none, &b).ok());
  h.mutable_resident()->set_values(b.id());
  ASSERT_TRUE(Scan(*stub_, h, nullptr, &none, &c).ok());
  ASSERT_TRUE(Get(*stub_, c.id(), &twice).ok());
  v1::ScanHeader plain;
  plain.set_dtype(v1::DTYPE_INT64);
  plain.set_op(v1::OPERATOR_SUM);
  std::string once;
  ASSERT_TRUE(Scan(*stub_, plain, &data, &once).ok());
  ASSERT_TRUE(Scan(*stub_, plain, &once, &direct).ok());
  EXPECT_EQ(twice, direct);
}

// The server answers once the header has arrived: a client that never half-closes still gets its
// result (grpcio's streaming stubs half-close ~0.5 ms late).
TEST_F(ResidentTest, ResidentCallsAnswerWithoutWaitingForTheHalfClose) {
  const std::string data = RandomArray(v1::DTYPE_INT32, 5000, 8);
  v1::ArrayInfo info;
  ASSERT_TRUE(Put(*stub_, v1::DTYPE_INT32, data, &info).ok());
  v1::ScanHeader h;
  h.set_dtype(v1::DTYPE_INT32);
  h.set_op(v1::OPERATOR_SUM);
  std::string streamed;
  ASSERT_TRUE(Scan(*stub_, h, &data, &streamed).ok());
  h.mutable_resident()->set_values(info.id());
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  auto stream = stub_->Scan(&ctx);
  v1::ScanRequest req;
  *req.mutable_header() = h;
  ASSERT_TRUE(stream->Write(req));  // no WritesDone before the results are read
  v1::ScanResponse resp;
  std::string got;
  while (stream->Read(&resp)) got += resp.data();
  EXPECT_TRUE(stream->Finish().ok());
  EXPECT_EQ(got, streamed);
}

TEST_F(ResidentTest, AnotherTenantsIdsAreNotFoundExactlyAsUnknownOnes) {
  const std::string data = RandomArray(v1::DTYPE_INT32, 100, 9);
  v1::ArrayInfo info;
  ASSERT_TRUE(Put(*stub_, v1::DTYPE_INT32, data, &info, "alice").ok());
  std::string back;
  EXPECT_TRUE(Get(*stub_, info.id(), &back, "alice").ok());
  const grpc::Status other = Get(*stub_, info.id(), &back, "bob");
  {  // empty metadata is the default tenant: it sees the array put without metadata
    v1::ArrayInfo plain;
    ASSERT_TRUE(Put(*stub_, v1::DTYPE_INT32, data, &plain).ok());
    grpc::ClientContext ctx;
    ctx.AddMetadata("gpuscan-tenant", "");
    v1::ListArraysResponse mine;
    ASSERT_TRUE(stub_->ListArrays(&ctx, {}, &mine).ok());
    ASSERT_EQ(mine.arrays_size(), 1);
    EXPECT_EQ(mine.arrays(0).id(), plain.id());
  }
  const grpc::Status none = Get(*stub_, info.id(), &back, "");
  std::string mutated = info.id();
  mutated[0] ^= 1;
  const grpc::Status guessed = Get(*stub_, mutated, &back, "alice");
  for (const grpc::Status& s : {other, none, guessed}) {
    EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
    EXPECT_NE(s.error_message().find("no such resident array"), std::string::npos) << s.error_message();
  }
  v1::ListArraysResponse alice, bob;
  grpc::ClientContext a, b;
  Tenant(&a, "alice");
  Tenant(&b, "bob");
  ASSERT_TRUE(stub_->ListArrays(&a, {}, &alice).ok());
  ASSERT_TRUE(stub_->ListArrays(&b, {}, &bob).ok());
  ASSERT_EQ(alice.arrays_size(), 1);
  EXPECT_EQ(alice.arrays(0).id(), info.id());
  EXPECT_EQ(alice.tenant_bytes(), 400u);
  EXPECT_EQ(bob.arrays_size(), 0);
  v1::ReduceHeader r;
  r.set_dtype(v1::DTYPE_INT32);
  r.set_op(v1::OPERATOR_SUM);
  r.mutable_resident()->set_values(info.id());
  std::string raw;
  EXPECT_EQ(Reduce(*stub_, r, nullptr, &raw, "bob").error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(ResidentTest, DroppedArraysAreGoneAndTheirBytesReturn) {
  v1::ArrayInfo info;
  ASSERT_TRUE(Put(*stub_, v1::DTYPE_FLOAT64, RandomArray(v1::DTYPE_FLOAT64, 1000, 3), &info).ok());
  v1::DropArrayRequest drop;
  drop.set_id(info.id());
  v1::DropArrayResponse dropped;
  grpc::ClientContext c1, c2, c3;
  ASSERT_TRUE(stub_->DropArray(&c1, drop, &dropped).ok());
  EXPECT_EQ(dropped.info().id(), info.id());
  EXPECT_EQ(stub_->DropArray(&c2, drop, &dropped).error_code(), grpc::StatusCode::NOT_FOUND);
  v1::ListArraysResponse list;
  ASSERT_TRUE(stub_->ListArrays(&c3, {}, &list).ok());
  EXPECT_EQ(list.used_bytes(), 0u);
}

// A call holds its arrays while it runs; once it has answered, a drop frees the bytes at once
// (they were let go at OnDone, which can come after the client's next calls: a Put right after
// could find the budget still taken).
TEST_F(ResidentTest, ADroppedArraysBytesReturnAsSoonAsTheCallThatReadItAnswered) {
  for (int i = 0; i < 200; ++i) {
    v1::ArrayInfo info;
    ASSERT_TRUE(Put(*stub_, v1::DTYPE_INT32, RandomArray(v1::DTYPE_INT32, 1000 + i, 40 + i), &info).ok());
    v1::ReduceHeader r;
    r.set_dtype(v1::DTYPE_INT32);
    r.set_op(v1::OPERATOR_SUM);
    r.mutable_resident()->set_values(info.id());
    std::string raw;
    ASSERT_TRUE(Reduce(*stub_, r, nullptr, &raw).ok());
    v1::DropArrayRequest drop;
    drop.set_id(info.id());
    v1::DropArrayResponse dropped;
    v1::ListArraysResponse list;
    grpc::ClientContext c1, c2;
    ASSERT_TRUE(stub_->DropArray(&c1, drop, &dropped).ok());
    ASSERT_TRUE(stub_->ListArrays(&c2, {}, &list).ok());
    ASSERT_EQ(list.used_bytes(), 0u) << "round " << i;
  }
}

// What needs a real array to refuse (the bad-input matrix has the rows that need none).
TEST_F(ResidentTest, HeadersThatDoNotFitTheArrayNameTheField) {
  v1::ArrayInfo info;
  ASSERT_TRUE(Put(*stub_, v1::DTYPE_INT32, RandomArray(v1::DTYPE_INT32, 100, 4), &info).ok());
  auto scan = [&](v1::ScanHeader h, const std::string* data = nullptr) {
    std::string out;
    return Scan(*stub_, h, data, &out);
  };
  v1::ScanHeader h;
  h.set_dtype(v1::DTYPE_INT64);
  h.set_op(v1::OPERATOR_SUM);
  h.mutable_resident()->set_values(info.id());
  grpc::Status s = scan(h);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("header.dtype DTYPE_INT64 differs from the resident array's DTYPE_INT32"),
            std::string::npos) << s.error_message();
  h.set_dtype(v1::DTYPE_INT32);
  h.set_element_count(99);
  s = scan(h);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("header.element_count 99 differs"), std::string::npos) << s.error_message();
  h.clear_element_count();
  {  // data in the header's own request (later requests are not read: the input is resident)
    grpc::ClientContext ctx;
    auto stream = stub_->Scan(&ctx);
    v1::ScanRequest req;
    *req.mutable_header() = h;
    req.set_data(RandomArray(v1::DTYPE_INT32, 10, 5));
    stream->Write(req);
    stream->WritesDone();
    v1::ScanResponse resp;
    while (stream->Read(&resp)) {
    }
    s = stream->Finish();
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(s.error_message().find("header.resident"), std::string::npos) << s.error_message();
  }
  std::string back;
  s = Get(*stub_, info.id(), &back, "", 101);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::OUT_OF_RANGE);
  EXPECT_NE(s.error_message().find("offset 101"), std::string::npos) << s.error_message();
  s = Get(*stub_, info.id(), &back, "", 50, 51);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::OUT_OF_RANGE);
  EXPECT_NE(s.error_message().find("count 51"), std::string::npos) << s.error_message();
  EXPECT_TRUE(Get(*stub_, info.id(), &back, "", 100).ok());  // the empty range at the end
  EXPECT_TRUE(back.empty());
}

TEST(ResidentLimits, IdleArraysExpireAfterTheirTtlAndUseRenewsThem) {
  server::ServerOptions o = ResidentOptions();
  o.resident_ttl = std::chrono::milliseconds(400);
  TestServer server(o);
  auto stub = server.stub();
  v1::ArrayInfo kept, idle;
  ASSERT_TRUE(Put(*stub, v1::DTYPE_INT32, RandomArray(v1::DTYPE_INT32, 10, 1), &kept).ok());
  ASSERT_TRUE(Put(*stub, v1::DTYPE_INT32, RandomArray(v1::DTYPE_INT32, 10, 2), &idle, "", true, 100000).ok());
  EXPECT_EQ(idle.ttl_ms(), 400u);  // cut to --resident-ttl-ms
  std::string back;
  for (int i = 0; i < 6; ++i) {  // 600 ms of use, every 100 ms
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    ASSERT_TRUE(Get(*stub, kept.id(), &back).ok()) << i;
  }
  EXPECT_EQ(Get(*stub, idle.id(), &back).error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST(ResidentLimits, TheBudgetAndTheQuotaAreNeverPassed) {
  server::ServerOptions o = ResidentOptions(40000);
  o.tenant_quota_bytes = 25000;
  TestServer server(o);
  auto stub = server.stub();
  v1::ArrayInfo a, b, c;
  const std::string six = RandomArray(v1::DTYPE_INT32, 5000, 1);  // 20000 bytes
  ASSERT_TRUE(Put(*stub, v1::DTYPE_INT32, six, &a, "t1").ok());
  grpc::Status quota = Put(*stub, v1::DTYPE_INT32, six, &b, "t1");
  EXPECT_EQ(quota.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(quota.error_message().find("--tenant-quota-bytes"), std::string::npos) << quota.error_message();
  ASSERT_TRUE(Put(*stub, v1::DTYPE_INT32, six, &b, "t2").ok());
  grpc::Status budget = Put(*stub, v1::DTYPE_INT32, six, &c, "t3", false);  // undeclared: found at the end
  EXPECT_EQ(budget.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(budget.error_message().find("--resident-bytes"), std::string::npos) << budget.error_message();
  // A kept scan result counts too.
  v1::ScanHeader h;
  h.set_dtype(v1::DTYPE_INT32);
  h.set_op(v1::OPERATOR_SUM);
  h.mutable_resident()->set_values(a.id());
  h.mutable_resident()->set_keep(true);
  std::string none;
  v1::ArrayInfo kept;
  grpc::ClientContext ctx;
  EXPECT_EQ(Scan(*stub, h, nullptr, &none, &kept, "t1").error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  h.mutable_resident()->set_keep(false);  // streamed back: scratch, outside the budget
  EXPECT_TRUE(Scan(*stub, h, nullptr, &none, &kept, "t1").ok());
  EXPECT_EQ(none.size(), six.size());
}

TEST(ResidentLimits, AnIdOfAnEarlierRunSaysTheServerRestarted) {
  std::string id;
  {
    TestServer first(ResidentOptions());
    v1::ArrayInfo info;
    ASSERT_TRUE(Put(*first.stub(), v1::DTYPE_INT32, RandomArray(v1::DTYPE_INT32, 10, 1), &info).ok());
    id = info.id();
  }
  TestServer second(ResidentOptions());
  std::string back;
  const grpc::Status s = Get(*second.stub(), id, &back);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_NE(s.error_message().find("restarted"), std::string::npos) << s.error_message();
}

TEST(ResidentLimits, AServerWithoutABudgetAnswersUnimplemented) {
  TestServer server;
  std::string back;
  EXPECT_EQ(Get(*server.stub(), std::string(24, 'x'), &back).error_code(), grpc::StatusCode::UNIMPLEMENTED);
  v1::ArrayInfo info;
  const grpc::Status s = Put(*server.stub(), v1::DTYPE_INT32, "abcd", &info);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_NE(s.error_message().find("--resident-bytes"), std::string::npos);
}

}  // namespace
}  // namespace gpuscan::testing
