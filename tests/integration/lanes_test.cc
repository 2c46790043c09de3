// Striped lanes: one array over K concurrent calls gives exactly the single call's result, for
// every RPC and dtype, at lengths around chunk boundaries (K above the number of chunks, K = 1,
// n = 0); and the failures that need several calls: a cancelled lane fails its siblings, lanes
// that disagree, a missing lane after the wait, a reused id, a lane claimed twice; an array
// counts once against admission. (Failures of a single lane's header or chunks are rows of the
// bad input matrix.) Small chunks (64 elements) so short arrays span many chunks.
#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
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

constexpr size_t kLaneChunkBytes = 256;

server::ServerOptions LaneServerOptions() {
  server::ServerOptions o;
  o.lane_wait = std::chrono::milliseconds(300);
  o.max_lanes = 16;
  return o;
}

class LanesTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = new TestServer(LaneServerOptions()); }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  static TestServer* server_;
};
TestServer* LanesTest::server_ = nullptr;

using testing::SameBits;

template <class T, template <class> class Op>
void CheckScanLanes(Client& client, v1::Operator op, bool exclusive) {
  GPUSCAN_SEEDED_RNG(rng);
  for (size_t n : testing::ChunkBoundaryLengths(kLaneChunkBytes / sizeof(T))) {
    const std::vector<T> x = testing::RandomInput<T, Op<T>>(n, rng);
    ScanOptions one;
    one.op = op;
    one.exclusive = exclusive;
    one.lanes = 1;
    const auto single = client.Scan(x, one).values;
    ASSERT_EQ(single.size(), n);
    for (uint32_t k : {2u, 3u, 8u}) {
      ScanOptions o = one;
      o.lanes = k;
      const auto r = client.Scan(x, o);
      SCOPED_TRACE("n=" + std::to_string(n) + " lanes=" + std::to_string(k));
      ASSERT_EQ(r.values.size(), n);
      EXPECT_TRUE(SameBits(r.values, single)) << "lanes differ from one call";
      EXPECT_EQ(r.timing.bytes_in, n * sizeof(T));
    }
  }
}

TEST_F(LanesTest, ScanEqualsSingleCall) {
  Client client(server_->client_options(kLaneChunkBytes));
  CheckScanLanes<int32_t, ops::Sum>(client, v1::OPERATOR_SUM, false);
  CheckScanLanes<int64_t, ops::Max>(client, v1::OPERATOR_MAX, true);
  CheckScanLanes<uint32_t, ops::BitXor>(client, v1::OPERATOR_BIT_XOR, false);
  CheckScanLanes<uint64_t, ops::Product>(client, v1::OPERATOR_PRODUCT, true);
  CheckScanLanes<float, ops::Sum>(client, v1::OPERATOR_SUM, false);
  CheckScanLanes<double, ops::Min>(client, v1::OPERATOR_MIN, true);
}

template <class T, template <class> class Op>
void CheckReduceLanes(Client& client, v1::Operator op) {
  GPUSCAN_SEEDED_RNG(rng);
  for (size_t n : testing::ChunkBoundaryLengths(kLaneChunkBytes / sizeof(T))) {
    const std::vector<T> x = testing::RandomInput<T, Op<T>>(n, rng);
    const auto single = client.Reduce(x, op, 1);
    for (uint32_t k : {2u, 3u, 8u}) {
      const auto r = client.Reduce(x, op, k);
      SCOPED_TRACE("n=" + std::to_string(n) + " lanes=" + std::to_string(k));
      EXPECT_EQ(0, std::memcmp(&r.value, &single.value, sizeof(T))) << "lanes differ from one call";
      EXPECT_EQ(r.element_count, n);
    }
  }
}

TEST_F(LanesTest, ReduceEqualsSingleCall) {
  Client client(server_->client_options(kLaneChunkBytes));
  CheckReduceLanes<int32_t, ops::Sum>(client, v1::OPERATOR_SUM);
  CheckReduceLanes<int64_t, ops::BitAnd>(client, v1::OPERATOR_BIT_AND);
  CheckReduceLanes<uint32_t, ops::Max>(client, v1::OPERATOR_MAX);
  CheckReduceLanes<uint64_t, ops::BitOr>(client, v1::OPERATOR_BIT_OR);
  CheckReduceLanes<float, ops::Sum>(client, v1::OPERATOR_SUM);
  CheckReduceLanes<double, ops::Product>(client, v1::OPERATOR_PRODUCT);
}

template <class T>
void CheckCompactLanes(Client& client) {
  GPUSCAN_SEEDED_RNG(rng);
  for (size_t n : testing::ChunkBoundaryLengths(kLaneChunkBytes / sizeof(T))) {
    const std::vector<T> x = testing::RandomCompactInput<T>(n, rng);
    for (int mode = 0; mode < 2; ++mode) {
      CompactOptions one;
      if (mode == 0) {
        one.use_flags = true;
        one.flags = testing::RandomFlags(n, rng, 0.3);
        one.output = v1::COMPACT_OUTPUT_VALUES_AND_INDICES;
      } else {
        one.predicate.set_op(v1::PREDICATE_OP_NONZERO);
        one.output = v1::COMPACT_OUTPUT_INDICES;
      }
      one.lanes = 1;
      const auto single = client.Compact(x, one);
      for (uint32_t k : {2u, 3u, 8u}) {
        CompactOptions o = one;
        o.lanes = k;
        const auto r = client.Compact(x, o);
        SCOPED_TRACE("n=" + std::to_string(n) + " lanes=" + std::to_string(k) + " mode=" + std::to_string(mode));
        ASSERT_EQ(r.values.size(), single.values.size());
        EXPECT_TRUE(SameBits(r.values, single.values));
        EXPECT_EQ(r.indices, single.indices);
        EXPECT_EQ(r.kept_count, single.kept_count);
      }
    }
  }
}

TEST_F(LanesTest, CompactEqualsSingleCall) {
  Client client(server_->client_options(kLaneChunkBytes));
  CheckCompactLanes<int32_t>(client);
  CheckCompactLanes<uint64_t>(client);
  CheckCompactLanes<float>(client);
  CheckCompactLanes<double>(client);
}

// The client's lanes default (ClientOptions::lanes) and the byte-level streaming call.
TEST_F(LanesTest, ClientDefaultAndStreamingCall) {
  ClientOptions co = server_->client_options(kLaneChunkBytes);
  co.lanes = 4;
  Client client(co);
  GPUSCAN_SEEDED_RNG(rng);
  const auto x = testing::RandomInput<int32_t, ops::Sum<int32_t>>(5000, rng);
  EXPECT_EQ(client.Scan(x).values, (testing::ScanRef<int32_t, ops::Sum<int32_t>>(x, false)));
  EXPECT_EQ(client.Reduce(x, v1::OPERATOR_SUM).value, (testing::ReduceRef<int32_t, ops::Sum<int32_t>>(x)));
  // The server says what it joins; more lanes than its --max-lanes are capped to it.
  const v1::ServerInfo info = client.Info();
  EXPECT_EQ(info.limits().max_lanes(), 16u);
  EXPECT_EQ(info.limits().lane_wait_ms(), 300u);
  ScanOptions so;
  so.lanes = 40;
  EXPECT_EQ(client.Scan(x, so).values, (testing::ScanRef<int32_t, ops::Sum<int32_t>>(x, false)));
}

// A target of several addresses with round_robin: the client pins each array's lanes to one of
// them (here both name the same server, so a lane that strayed would still meet its siblings;
// what this checks is that a pinned target works end to end, TLS names aside).
TEST_F(LanesTest, MultiAddressTargetIsPinned) {
  ClientOptions co = server_->client_options(kLaneChunkBytes);
  const std::string addr = server_->target();
  co.target = "ipv4:" + addr + "," + addr;
  co.load_balancing_policy = "round_robin";
  Client client(co);
  GPUSCAN_SEEDED_RNG(rng);
  const auto x = testing::RandomInput<uint64_t, ops::Sum<uint64_t>>(2000, rng);
  ScanOptions so;
  so.lanes = 3;
  EXPECT_EQ(client.Scan(x, so).values, (testing::ScanRef<uint64_t, ops::Sum<uint64_t>>(x, false)));
}

// Inputs read by position (SourceAt) and results written by position (SinkAt) let each lane
// copy at once; plain Sources and Sinks take turns. Every mix gives the reference, around chunk
// boundaries, on one stream and on lanes.
TEST_F(LanesTest, SourceAtAndSinkAtMixWithPlainOnes) {
  Client client(server_->client_options(kLaneChunkBytes));
  GPUSCAN_SEEDED_RNG(rng);
  for (size_t n : testing::ChunkBoundaryLengths(kLaneChunkBytes / sizeof(int64_t))) {
    const auto x = testing::RandomInput<int64_t, ops::Sum<int64_t>>(n, rng);
    const auto ref = testing::ScanRef<int64_t, ops::Sum<int64_t>>(x, true);
    v1::ScanHeader h;
    h.set_dtype(v1::DTYPE_INT64);
    h.set_op(v1::OPERATOR_SUM);
    h.set_kind(v1::SCAN_KIND_EXCLUSIVE);
    for (uint32_t k : {1u, 2u, 3u, 8u}) {
      for (int mix = 0; mix < 4; ++mix) {
        SCOPED_TRACE("n=" + std::to_string(n) + " lanes=" + std::to_string(k) + " mix=" + std::to_string(mix));
        const bool source_at = mix & 1, sink_at = mix & 2;
        std::vector<int64_t> out(n, -1);
        Source in = SourceAt::Memory(x.data(), n * sizeof(int64_t));
        if (!source_at) in = [plain = in](void* b, size_t m) mutable { return plain(b, m); };
        size_t appended = 0;
        Sink sink = SinkAt::Memory(out.data(), n * sizeof(int64_t));
        if (!sink_at) {
          sink = [&](const void* d, size_t b) {
            ASSERT_LE(appended + b, n * sizeof(int64_t));
            std::memcpy(reinterpret_cast<char*>(out.data()) + appended, d, b);
            appended += b;
          };
        }
        const Timing t = client.ScanStream(h, in, sink, {}, k);
        EXPECT_EQ(t.bytes_out, n * sizeof(int64_t));
        EXPECT_EQ(out, ref);
      }
    }
  }
}

// Compaction's kept values and indices written by position at their kept offsets, from lanes
// reading values and flags by position: the typed call's (ordered) result.
TEST_F(LanesTest, CompactIntoSinkAtsByKeptOffset) {
  Client client(server_->client_options(kLaneChunkBytes));
  GPUSCAN_SEEDED_RNG(rng);
  for (size_t n : testing::ChunkBoundaryLengths(kLaneChunkBytes / sizeof(float))) {
    const auto x = testing::RandomCompactInput<float>(n, rng);
    CompactOptions o;
    o.use_flags = true;
    o.flags = testing::RandomFlags(n, rng, 0.4);
    o.output = v1::COMPACT_OUTPUT_VALUES_AND_INDICES;
    o.lanes = 1;
    const auto want = client.Compact(x, o);
    v1::CompactHeader h;
    h.set_dtype(v1::DTYPE_FLOAT32);
    h.set_use_flags(true);
    h.set_output(v1::COMPACT_OUTPUT_VALUES_AND_INDICES);
    for (uint32_t k : {2u, 3u, 8u}) {
      SCOPED_TRACE("n=" + std::to_string(n) + " lanes=" + std::to_string(k));
      std::vector<float> values(n);
      std::vector<int64_t> indices(n);
      const v1::CompactResponse last = client.CompactStream(
          h, SourceAt::Memory(x.data(), n * sizeof(float)), SourceAt::Memory(o.flags.data(), n),
          SinkAt::Memory(values.data(), n * sizeof(float)), SinkAt::Memory(indices.data(), n * sizeof(int64_t)), {}, k);
      ASSERT_EQ(last.kept_count(), want.kept_count);
      values.resize(last.kept_count());
      indices.resize(last.kept_count());
      EXPECT_TRUE(SameBits(values, want.values));
      EXPECT_EQ(indices, want.indices);
    }
  }
}

// A SinkAt or SourceAt that throws on a lane's thread fails the call with its exception, and
// the client stays usable; a result that does not fit a SinkAt::Memory is DATA_LOSS.
TEST_F(LanesTest, ThrowingSourceAtOrSinkAtFailsTheCall) {
  Client client(server_->client_options(kLaneChunkBytes));
  GPUSCAN_SEEDED_RNG(rng);
  const size_t n = 40 * kLaneChunkBytes / sizeof(int32_t);
  const auto x = testing::RandomInput<int32_t, ops::Sum<int32_t>>(n, rng);
  v1::ScanHeader h;
  h.set_dtype(v1::DTYPE_INT32);
  h.set_op(v1::OPERATOR_SUM);
  const SourceAt good = SourceAt::Memory(x.data(), n * sizeof(int32_t));
  SourceAt bad_in(n * sizeof(int32_t), [&](uint64_t offset, void* buf, size_t m) {
    if (offset >= 17 * kLaneChunkBytes) throw std::runtime_error("source broke at " + std::to_string(offset));
    good.ReadAt(offset, buf, m);
  });
  SinkAt bad_out([](uint64_t offset, const void*, size_t) {
    if (offset >= 9 * kLaneChunkBytes) throw std::runtime_error("sink broke");
  });
  for (uint32_t k : {1u, 4u}) {
    SCOPED_TRACE("lanes=" + std::to_string(k));
    try {
      client.ScanStream(h, bad_in, [](const void*, size_t) {}, {}, k);
      ADD_FAILURE() << "no exception from the Source";
    } catch (const std::runtime_error& e) {
      EXPECT_THAT(e.what(), HasSubstr("source broke"));
    }
    try {
      client.ScanStream(h, good, bad_out, {}, k);
      ADD_FAILURE() << "no exception from the Sink";
    } catch (const std::runtime_error& e) {
      EXPECT_THAT(e.what(), HasSubstr("sink broke"));
    }
    std::vector<int32_t> small(n / 2);
    try {
      client.ScanStream(h, good, SinkAt::Memory(small.data(), small.size() * sizeof(int32_t)), {}, k);
      ADD_FAILURE() << "no DATA_LOSS";
    } catch (const RpcError& e) {
      EXPECT_EQ(e.code(), grpc::StatusCode::DATA_LOSS);
      EXPECT_THAT(e.message(), HasSubstr("of a result of"));
    }
  }
  ScanOptions so;
  so.lanes = 4;
  EXPECT_EQ(client.Scan(x, so).values, (testing::ScanRef<int32_t, ops::Sum<int32_t>>(x, false)));
}

// ---- raw lanes, for the failures

std::string RandomId() {
  GPUSCAN_SEEDED_RNG(rng);
  std::string id(16, '\0');
  for (char& c : id) c = static_cast<char>(rng());
  return id;
}

v1::ScanRequest LaneHead(const std::string& id, uint32_t lane, uint32_t k, uint64_t chunk_elements,
                         v1::DType dtype = v1::DTYPE_INT32) {
  v1::ScanRequest r;
  r.mutable_header()->set_dtype(dtype);
  r.mutable_header()->set_op(v1::OPERATOR_SUM);
  v1::Lanes* l = r.mutable_header()->mutable_lanes();
  l->set_array_id(id);
  l->set_lane(lane);
  l->set_lane_count(k);
  l->set_chunk_elements(chunk_elements);
  return r;
}

v1::ScanRequest Chunk(size_t elements, uint32_t seed) {
  std::vector<int32_t> v(elements);
  for (size_t i = 0; i < elements; ++i) v[i] = static_cast<int32_t>(seed * 7919 + i * 31 + 1);
  v1::ScanRequest r;
  r.set_data(std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(int32_t)));
  return r;
}

struct RawLane {
  explicit RawLane(v1::GpuScan::Stub& stub) {
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    stream = stub.Scan(&ctx);
  }
  void Close() {
    if (!closed) stream->WritesDone();
    closed = true;
  }
  grpc::Status Finish() {
    Close();
    v1::ScanResponse resp;
    while (stream->Read(&resp)) {
    }
    return stream->Finish();
  }
  bool closed = false;
  // Sends one chunk and waits for its result: the lane has joined its array (and, as results
  // come in global order, so have the lanes of every earlier chunk).
  void Joined(size_t elements, uint32_t seed) {
    ASSERT_TRUE(stream->Write(Chunk(elements, seed)));
    v1::ScanResponse resp;
    ASSERT_TRUE(stream->Read(&resp));
  }
  grpc::ClientContext ctx;
  std::unique_ptr<grpc::ClientReaderWriter<v1::ScanRequest, v1::ScanResponse>> stream;
};

TEST_F(LanesTest, CancelledLaneFailsItsSiblings) {
  auto stub = server_->stub();
  const std::string id = RandomId();
  RawLane a(*stub), b(*stub), c(*stub);
  ASSERT_TRUE(a.stream->Write(LaneHead(id, 0, 3, 64)));
  ASSERT_TRUE(b.stream->Write(LaneHead(id, 1, 3, 64)));
  ASSERT_TRUE(c.stream->Write(LaneHead(id, 2, 3, 64)));
  a.Joined(64, 1);
  b.Joined(64, 2);
  b.ctx.TryCancel();
  const grpc::Status sa = a.Finish();
  const grpc::Status sc = c.Finish();
  b.Finish();
  for (const grpc::Status* s : {&sa, &sc}) {
    EXPECT_EQ(s->error_code(), grpc::StatusCode::CANCELLED) << s->error_message();
    EXPECT_THAT(s->error_message(), HasSubstr("lanes.lane=1"));
    EXPECT_THAT(s->error_message(), HasSubstr("cancelled"));
  }
}

TEST_F(LanesTest, MissingLaneFailsAfterTheWait) {
  auto stub = server_->stub();
  const std::string id = RandomId();
  RawLane a(*stub);
  ASSERT_TRUE(a.stream->Write(LaneHead(id, 0, 3, 64)));
  ASSERT_TRUE(a.stream->Write(Chunk(64, 1)));
  const auto t0 = std::chrono::steady_clock::now();
  const grpc::Status s = a.Finish();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << s.error_message();
  EXPECT_THAT(s.error_message(), HasSubstr("lane(s) 1, 2 of lanes.lane_count=3 never arrived"));
  EXPECT_THAT(s.error_message(), HasSubstr("--lane-wait-ms=300"));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  // A lane that comes after its array gave up is told why at once.
  RawLane late(*stub);
  ASSERT_TRUE(late.stream->Write(LaneHead(id, 1, 3, 64)));
  const grpc::Status sl = late.Finish();
  EXPECT_EQ(sl.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << sl.error_message();
  EXPECT_THAT(sl.error_message(), HasSubstr("already ended"));
}

TEST_F(LanesTest, LanesThatDisagreeFailNamingTheField) {
  auto stub = server_->stub();
  std::vector<std::pair<std::string, std::function<void(v1::ScanRequest&)>>> cases = {
      {"header.dtype (DTYPE_INT64 here, DTYPE_INT32 on lanes.lane=0)",
       [](v1::ScanRequest& r) { r.mutable_header()->set_dtype(v1::DTYPE_INT64); }},
      {"header.op (OPERATOR_MAX here, OPERATOR_SUM on lanes.lane=0)",
       [](v1::ScanRequest& r) { r.mutable_header()->set_op(v1::OPERATOR_MAX); }},
      {"header.lanes.lane_count (3 here, 2 on lanes.lane=0)",
       [](v1::ScanRequest& r) { r.mutable_header()->mutable_lanes()->set_lane_count(3); }},
      {"header.lanes.chunk_elements (32 here, 64 on lanes.lane=0)",
       [](v1::ScanRequest& r) { r.mutable_header()->mutable_lanes()->set_chunk_elements(32); }},
  };
  for (auto& [expect, change] : cases) {
    SCOPED_TRACE(expect);
    const std::string id = RandomId();
    RawLane a(*stub), b(*stub);
    ASSERT_TRUE(a.stream->Write(LaneHead(id, 0, 2, 64)));
    a.Joined(64, 1);  // lane 0 first
    v1::ScanRequest second = LaneHead(id, 1, 2, 64);
    change(second);
    ASSERT_TRUE(b.stream->Write(second));
    const grpc::Status sb = b.Finish();
    const grpc::Status sa = a.Finish();
    EXPECT_EQ(sb.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << sb.error_message();
    EXPECT_THAT(sb.error_message(), HasSubstr(expect));
    EXPECT_EQ(sa.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << sa.error_message();
    EXPECT_THAT(sa.error_message(), HasSubstr("lanes.lane=1 of array"));
    EXPECT_THAT(sa.error_message(), HasSubstr(expect));
  }
}

TEST_F(LanesTest, ReusedIdAndDoubleLaneAreRefused) {
  auto stub = server_->stub();
  const std::string id = RandomId();
  {
    RawLane a(*stub), b(*stub), dup(*stub);
    ASSERT_TRUE(a.stream->Write(LaneHead(id, 0, 2, 64)));
    a.Joined(64, 1);
    ASSERT_TRUE(dup.stream->Write(LaneHead(id, 0, 2, 64)));
    const grpc::Status sd = dup.Finish();
    EXPECT_EQ(sd.error_code(), grpc::StatusCode::ALREADY_EXISTS) << sd.error_message();
    EXPECT_THAT(sd.error_message(), HasSubstr("lanes.lane=0 of array"));
    EXPECT_THAT(sd.error_message(), HasSubstr("has already joined"));
    ASSERT_TRUE(b.stream->Write(LaneHead(id, 1, 2, 64)));
    ASSERT_TRUE(b.stream->Write(Chunk(64, 2)));
    ASSERT_TRUE(a.stream->Write(Chunk(10, 3)));
    b.Close();
    EXPECT_TRUE(a.Finish().ok());
    EXPECT_TRUE(b.Finish().ok());
  }
  RawLane again(*stub);
  ASSERT_TRUE(again.stream->Write(LaneHead(id, 0, 2, 64)));
  const grpc::Status s = again.Finish();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::ALREADY_EXISTS) << s.error_message();
  EXPECT_THAT(s.error_message(), HasSubstr("already completed"));
}

// A chunk missing in the middle (lane 1 ends early while lane 0 goes on) is named.
TEST_F(LanesTest, MissingChunkIsNamed) {
  auto stub = server_->stub();
  const std::string id = RandomId();
  RawLane a(*stub), b(*stub);
  ASSERT_TRUE(a.stream->Write(LaneHead(id, 0, 2, 64)));
  ASSERT_TRUE(b.stream->Write(LaneHead(id, 1, 2, 64)));
  ASSERT_TRUE(b.stream->Write(Chunk(64, 1)));
  b.Close();  // lane 1 sent chunk 1 only
  ASSERT_TRUE(a.stream->Write(Chunk(64, 0)));
  a.stream->Write(Chunk(64, 2));
  a.stream->Write(Chunk(64, 4));  // chunk 3 (lane 1) never comes
  const grpc::Status sa = a.Finish();
  const grpc::Status sb = b.Finish();
  EXPECT_EQ(sa.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << sa.error_message();
  EXPECT_THAT(sa.error_message(), HasSubstr("chunk 3 is missing"));
  EXPECT_EQ(sb.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << sb.error_message();
}

// Only the array's last chunk may be short: a full chunk after a short one on another lane.
TEST_F(LanesTest, ShortChunkThatIsNotTheLastIsNamed) {
  auto stub = server_->stub();
  const std::string id = RandomId();
  RawLane a(*stub), b(*stub);
  ASSERT_TRUE(a.stream->Write(LaneHead(id, 0, 2, 64)));
  ASSERT_TRUE(b.stream->Write(LaneHead(id, 1, 2, 64)));
  ASSERT_TRUE(a.stream->Write(Chunk(32, 1)));
  b.stream->Write(Chunk(64, 2));
  const grpc::Status sb = b.Finish(), sa = a.Finish();
  EXPECT_EQ(sb.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << sb.error_message();
  EXPECT_THAT(sb.error_message(), HasSubstr("chunk 1 (lanes.lane=1) follows the short chunk 0"));
  EXPECT_EQ(sa.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << sa.error_message();
  EXPECT_THAT(sa.error_message(), HasSubstr("lanes.lane=1 of array"));
  EXPECT_THAT(sa.error_message(), HasSubstr("only the array's last chunk may be shorter"));
}

// K = 1 through the join, and a declared element count checked over the whole array.
TEST_F(LanesTest, OneLaneAndDeclaredCount) {
  auto stub = server_->stub();
  {
    RawLane a(*stub);
    v1::ScanRequest h = LaneHead(RandomId(), 0, 1, 64);
    h.mutable_header()->set_element_count(100);
    ASSERT_TRUE(a.stream->Write(h));
    ASSERT_TRUE(a.stream->Write(Chunk(64, 1)));
    ASSERT_TRUE(a.stream->Write(Chunk(36, 2)));
    EXPECT_TRUE(a.Finish().ok());
  }
  const std::string id = RandomId();
  RawLane a(*stub), b(*stub);
  v1::ScanRequest h0 = LaneHead(id, 0, 2, 64), h1 = LaneHead(id, 1, 2, 64);
  h0.mutable_header()->set_element_count(200);
  h1.mutable_header()->set_element_count(200);
  ASSERT_TRUE(a.stream->Write(h0));
  ASSERT_TRUE(b.stream->Write(h1));
  ASSERT_TRUE(a.stream->Write(Chunk(64, 1)));
  ASSERT_TRUE(b.stream->Write(Chunk(64, 2)));
  b.Close();
  const grpc::Status sa = a.Finish(), sb = b.Finish();
  for (const grpc::Status* s : {&sa, &sb}) {
    EXPECT_EQ(s->error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s->error_message();
    EXPECT_THAT(s->error_message(), HasSubstr("header.element_count=200 but the array's 2 lanes carried 128"));
  }
}

// One admission slot for the whole array: with --max-concurrent=1 and no queue, 4 lanes run.
TEST(LanesAdmission, AnArrayCountsOnce) {
  server::ServerOptions o = LaneServerOptions();
  o.max_concurrent = 1;
  o.max_queued = 0;
  TestServer server(o);
  Client client(server.client_options(kLaneChunkBytes));
  GPUSCAN_SEEDED_RNG(rng);
  const auto x = testing::RandomInput<int64_t, ops::Sum<int64_t>>(3000, rng);
  ScanOptions so;
  so.lanes = 4;
  EXPECT_EQ(client.Scan(x, so).values, (testing::ScanRef<int64_t, ops::Sum<int64_t>>(x, false)));
}

// How long a striped scan on `lanes` lanes takes to fail (UNAVAILABLE) once its server is gone,
// after one scan, right, that connected the lanes and learned the server's max_lanes.
std::chrono::steady_clock::duration StripedScanFailureOnceGone(ClientOptions co, uint32_t lanes) {
  auto server = std::make_unique<TestServer>(LaneServerOptions());
  co.target = server->target();
  co.chunk_bytes = kLaneChunkBytes;
  co.timeout = std::chrono::seconds(30);
  Client client(co);
  GPUSCAN_SEEDED_RNG(rng);
  const auto x = testing::RandomInput<int32_t, ops::Sum<int32_t>>(1000, rng);
  ScanOptions so;
  so.lanes = lanes;
  EXPECT_EQ(client.Scan(x, so).values, (testing::ScanRef<int32_t, ops::Sum<int32_t>>(x, false)));
  server.reset();  // gone: its port refuses
  const auto t0 = std::chrono::steady_clock::now();
  try {
    client.Scan(x, so);
    ADD_FAILURE() << "a striped scan on a server that is gone answered";
  } catch (const RpcError& e) {
    EXPECT_EQ(e.code(), grpc::StatusCode::UNAVAILABLE) << e.message();
  }
  return std::chrono::steady_clock::now() - t0;
}

// The server gone: a striped call's lane connections are refused and the call fails at once
// (UNAVAILABLE), not after the 10 s connect wait. gRPC's pick_first stays in TRANSIENT_FAILURE
// after a refused connect, so waiting to see a second failure waited out the whole wait (the
// chaos test's striped calls that ended 10 s after a SIGTERM).
TEST(LanesGone, AStripedCallToAServerThatWentAwayFailsAtOnce) {
  ClientOptions co;
  co.retry.attempts = 1;
  EXPECT_LT(StripedScanFailureOnceGone(co, 2), std::chrono::seconds(4));
}

// With retries: the call waits for a refused lane once over all its tries (~2 s), not once per
// try (three tries took ~6.3 s: chaos_sigterm's striped calls that ended past SIGTERM + grace).
TEST(LanesGone, RetriesDoNotWaitForARefusedLaneAgain) {
  ClientOptions co;
  co.retry.attempts = 3;
  co.retry.initial_backoff = std::chrono::milliseconds(100);
  uint32_t tries = 1;
  co.retry.on_retry = [&](const RpcError&, uint32_t next, std::chrono::milliseconds) { tries = next; };
  EXPECT_LT(StripedScanFailureOnceGone(co, 3), std::chrono::seconds(4));
  EXPECT_EQ(tries, 3u);
}

}  // namespace
}  // namespace gpuscan
