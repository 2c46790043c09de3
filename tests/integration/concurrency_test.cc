// Many clients at once, cancellation, deadlines, admission limits and graceful shutdown.
#include <atomic>
#include <future>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "reference.h"
#include "test_server.h"

namespace gpuscan {
namespace {

using ::testing::HasSubstr;
using testing::TestServer;

v1::ScanRequest Header(v1::DType dtype = v1::DTYPE_INT32) {
  v1::ScanRequest r;
  r.mutable_header()->set_dtype(dtype);
  r.mutable_header()->set_op(v1::OPERATOR_SUM);
  return r;
}

v1::ScanRequest DataChunk(const std::vector<int32_t>& x) {
  v1::ScanRequest r;
  r.set_data(std::string(reinterpret_cast<const char*>(x.data()), x.size() * sizeof(int32_t)));
  return r;
}

// Each client thread runs its own dtype and operator on its own data and checks the answer.
template <class T>
void ScanAndReduce(const std::string& target, size_t n, std::atomic<int>* failures) {
  std::mt19937_64 rng(testing::NewSeed());
  ClientOptions o;
  o.target = target;
  o.chunk_bytes = 32 * 1024;
  Client client(o);
  const std::vector<T> x = testing::RandomInput<T, ops::Max<T>>(n, rng);
  ScanOptions so;
  so.op = v1::OPERATOR_MAX;
  if (client.Scan(x, so).values != testing::ScanRef<T, ops::Max<T>>(x, false)) ++*failures;
  if (client.Reduce(x, v1::OPERATOR_MAX).value != testing::ReduceRef<T, ops::Max<T>>(x)) ++*failures;
}

TEST(ConcurrencyTest, ManyClientsEachGetTheirOwnResult) {
  TestServer server;
  std::atomic<int> failures{0};
  std::vector<std::thread> clients;
  constexpr int kClients = 24;
  for (int i = 0; i < kClients; ++i) {
    const size_t n = 50000 + 997 * i;
    switch (i % 3) {
      case 0: clients.emplace_back(ScanAndReduce<int32_t>, server.target(), n, &failures); break;
      case 1: clients.emplace_back(ScanAndReduce<double>, server.target(), n, &failures); break;
      default: clients.emplace_back(ScanAndReduce<uint64_t>, server.target(), n, &failures); break;
    }
  }
  for (auto& t : clients) t.join();
  EXPECT_EQ(failures.load(), 0);
}

TEST(ConcurrencyTest, CancelledCallsLeaveTheServerServing) {
  TestServer server;
  auto stub = server.stub();
  std::vector<int32_t> chunk(64 * 1024, 1);
  for (int i = 0; i < 20; ++i) {
    grpc::ClientContext ctx;
    auto stream = stub->Scan(&ctx);
    ASSERT_TRUE(stream->Write(Header()));
    ASSERT_TRUE(stream->Write(DataChunk(chunk)));
    if (i % 2 == 0) {  // mid-download: a result arrived, more to come
      v1::ScanResponse resp;
      ASSERT_TRUE(stream->Read(&resp));
      EXPECT_EQ(resp.data().size(), chunk.size() * sizeof(int32_t));
    }
    ctx.TryCancel();  // otherwise mid-upload
    EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::CANCELLED);
  }
  Client client(server.client_options());
  EXPECT_EQ(client.Health(), "SERVING");
  EXPECT_EQ(client.Scan(std::vector<int32_t>{1, 2, 3}).values, (std::vector<int32_t>{1, 3, 6}));
}

TEST(ConcurrencyTest, DeadlineExpiresMidStream) {
  TestServer server;
  auto stub = server.stub();
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(300));
  auto stream = stub->Scan(&ctx);
  stream->Write(Header());
  stream->Write(DataChunk({1, 2, 3}));
  std::this_thread::sleep_for(std::chrono::milliseconds(600));  // never half-closes in time
  EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  Client client(server.client_options());
  EXPECT_EQ(client.Reduce(std::vector<int32_t>{4, 5}, v1::OPERATOR_SUM).value, 9);
}

TEST(ConcurrencyTest, AdmissionQueuesThenRejects) {
  server::ServerOptions o;
  o.max_concurrent = 1;
  o.max_queued = 1;
  TestServer server(o);
  auto stub = server.stub();

  // A takes the only slot: its first chunk has been processed.
  grpc::ClientContext ctx_a;
  auto a = stub->Scan(&ctx_a);
  ASSERT_TRUE(a->Write(Header()));
  ASSERT_TRUE(a->Write(DataChunk({1, 2, 3})));
  v1::ScanResponse resp;
  ASSERT_TRUE(a->Read(&resp));

  // B waits in the queue (its header is read, nothing more).
  grpc::ClientContext ctx_b;
  auto b = stub->Scan(&ctx_b);
  ASSERT_TRUE(b->Write(Header()));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));

  // C finds the slot and the queue full.
  grpc::ClientContext ctx_c;
  auto c = stub->Scan(&ctx_c);
  c->Write(Header());
  c->WritesDone();
  const grpc::Status sc = c->Finish();
  EXPECT_EQ(sc.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(sc.error_message(), HasSubstr("server busy"));

  // A finishes; B is admitted and completes with the right answer and a queue time.
  a->WritesDone();
  while (a->Read(&resp)) {
  }
  EXPECT_TRUE(a->Finish().ok());
  ASSERT_TRUE(b->Write(DataChunk({4, 5, 6})));
  b->WritesDone();
  std::vector<int32_t> got;
  v1::Timing timing;
  while (b->Read(&resp)) {
    const auto* p = reinterpret_cast<const int32_t*>(resp.data().data());
    got.insert(got.end(), p, p + resp.data().size() / 4);
    if (resp.has_timing()) timing = resp.timing();
  }
  EXPECT_TRUE(b->Finish().ok());
  EXPECT_EQ(got, (std::vector<int32_t>{4, 9, 15}));
  EXPECT_GE(timing.queue_us(), 100000u);
}

TEST(ConcurrencyTest, ShutdownLetsInFlightCallsFinish) {
  TestServer server;
  auto stub = server.stub();
  grpc::ClientContext ctx;
  auto stream = stub->Scan(&ctx);
  ASSERT_TRUE(stream->Write(Header()));
  ASSERT_TRUE(stream->Write(DataChunk({1, 1})));
  v1::ScanResponse resp;
  ASSERT_TRUE(stream->Read(&resp));
  auto shutdown = std::async(std::launch::async, [&] { server.server().Shutdown(); });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  ASSERT_TRUE(stream->Write(DataChunk({1, 1})));
  stream->WritesDone();
  std::vector<int32_t> got;
  while (stream->Read(&resp)) {
    const auto* p = reinterpret_cast<const int32_t*>(resp.data().data());
    got.insert(got.end(), p, p + resp.data().size() / 4);
  }
  EXPECT_TRUE(stream->Finish().ok());
  EXPECT_EQ(got, (std::vector<int32_t>{3, 4}));
  shutdown.get();
}

}  // namespace
}  // namespace gpuscan

namespace gpuscan {
namespace {

// The byte budget: a call that declares no length reserves its worst case (a few chunks), so
// with a budget of one such call a second one must wait, and with no queue it is refused with a
// message naming the flag; a small call that declares its length still fits beside it.
TEST(ConcurrencyTest, AdmissionBoundsBytesInFlight) {
  server::ServerOptions o;
  o.max_concurrent = 8;
  o.max_queued = 0;
  o.chunk_bytes = 64 * 1024;
  o.max_inflight_bytes = 5 * (2 * o.chunk_bytes + 64 * 1024) + 16 * 1024;  // one undeclared call + a little
  TestServer server(o);
  auto stub = server.stub();

  grpc::ClientContext ctx_a;
  auto a = stub->Scan(&ctx_a);  // no element_count: reserves the worst case
  ASSERT_TRUE(a->Write(Header()));
  ASSERT_TRUE(a->Write(DataChunk({1, 2, 3})));
  v1::ScanResponse resp;
  ASSERT_TRUE(a->Read(&resp));

  grpc::ClientContext ctx_b;
  auto b = stub->Scan(&ctx_b);
  ASSERT_TRUE(b->Write(Header()));
  b->WritesDone();
  const grpc::Status sb = b->Finish();
  EXPECT_EQ(sb.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(sb.error_message(), HasSubstr("--max-inflight-bytes"));

  Client small(server.client_options());  // the typed API declares element_count
  EXPECT_EQ(small.Scan(std::vector<int32_t>{1, 2, 3}).values, (std::vector<int32_t>{1, 3, 6}));

  a->WritesDone();
  while (a->Read(&resp)) {
  }
  EXPECT_TRUE(a->Finish().ok());
  // The budget comes back (the server releases it just after the client sees the end): an
  // undeclared call runs again.
  grpc::Status sc;
  for (int attempt = 0; attempt < 40; ++attempt) {
    grpc::ClientContext ctx_c;
    auto c = stub->Scan(&ctx_c);
    c->Write(Header());
    c->Write(DataChunk({7}));
    c->WritesDone();
    while (c->Read(&resp)) {
    }
    sc = c->Finish();
    if (sc.error_code() != grpc::StatusCode::RESOURCE_EXHAUSTED) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(sc.ok()) << sc.error_message();
}

}  // namespace
}  // namespace gpuscan

namespace gpuscan {
namespace {

// --max-connection-age: connections are recycled (GOAWAY) but a call longer than the age still
// finishes, and later calls on the same client reconnect transparently.
TEST(ConcurrencyTest, ConnectionAgeRecyclesConnectionsWithoutCuttingCalls) {
  server::ServerOptions o;
  o.max_connection_age = std::chrono::milliseconds(150);
  TestServer server(o);
  auto stub = server.stub();
  grpc::ClientContext ctx;
  auto s = stub->Scan(&ctx);
  ASSERT_TRUE(s->Write(Header()));
  std::vector<int32_t> all;
  for (int i = 0; i < 6; ++i) {  // ~600 ms: four times the age
    const std::vector<int32_t> part = {i, 2 * i + 1};
    all.insert(all.end(), part.begin(), part.end());
    ASSERT_TRUE(s->Write(DataChunk(part)));
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  s->WritesDone();
  std::vector<int32_t> got;
  v1::ScanResponse resp;
  while (s->Read(&resp)) {
    const auto* p = reinterpret_cast<const int32_t*>(resp.data().data());
    got.insert(got.end(), p, p + resp.data().size() / sizeof(int32_t));
  }
  ASSERT_TRUE(s->Finish().ok());
  EXPECT_EQ(got, (testing::ScanRef<int32_t, ops::Sum<int32_t>>(all, false)));

  Client client(server.client_options());
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(client.Scan(std::vector<int32_t>{1, 2, 3}).values, (std::vector<int32_t>{1, 3, 6}));
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

}  // namespace
}  // namespace gpuscan
