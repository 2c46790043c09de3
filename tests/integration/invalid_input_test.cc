// The bad input matrix: every malformed request gets the right status code and a message naming
// the field and the value, and the server keeps serving everyone else.
//
// One table row per fault: the RPC, the raw request messages (sent on the raw stub, so any
// malformed sequence is possible), the expected code and the substrings the message must
// contain. Each row runs while a valid Scan is in flight on the same channel (started before
// the bad call, finished and checked after it), and is followed by a valid call of the row's
// RPC. AllRowsAtOnce sends every row concurrently, with valid calls running beside them.
// Engine-neutral: it runs on whichever engine GPUSCAN_TEST_ENGINE names (CTest: the cpu engine,
// and the cuda engine under label gpu).
// The rows are in invalid_input_*_rows.cc, by family; invalid_input_matrix.h builds them.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "engine/types.h"
#include "invalid_input_matrix.h"
#include "reference.h"
#include "test_server.h"

namespace gpuscan::matrix {

using ::testing::HasSubstr;
using testing::TestServer;

std::vector<Row> Rows() {
  std::vector<Row> rows;
  StreamRows(rows);
  LaneRows(rows);
  SharedMemoryRows(rows);
  DeviceMemoryRows(rows);
  DeviceMemoryHistogramSortRows(rows);
  DeviceMemorySegmentedRows(rows);
  HistogramRows(rows);
  SegmentedRows(rows);
  ReduceByKeyRows(rows);
  SortRows(rows);
  Scan2DRows(rows);
  NarrowRows(rows);
  return rows;
}

// ---------------------------------------------------------------------------------------------

// A valid Scan, in progress on the server for as long as this object lives: its header and
// first chunk were sent and the first result received before the constructor returns; Finish
// sends the second chunk, half-closes and checks every result against the reference.
class InFlightScan {
 public:
  static constexpr size_t kElems = kChunkBytes / sizeof(int64_t);

  explicit InFlightScan(v1::GpuScan::Stub& stub) {
    GPUSCAN_SEEDED_RNG(rng);
    x_ = testing::RandomInput<int64_t, ops::Sum<int64_t>>(2 * kElems, rng);
    ctx_.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    stream_ = stub.Scan(&ctx_);
    v1::ScanRequest first = ScanHead(v1::DTYPE_INT64);
    first.set_data(Chunk(0));
    EXPECT_TRUE(stream_->Write(first));
    v1::ScanResponse resp;
    EXPECT_TRUE(stream_->Read(&resp)) << "the valid call got no first result";
    Append(resp);
  }

  void Finish() {
    v1::ScanRequest second;
    second.set_data(Chunk(1));
    EXPECT_TRUE(stream_->Write(second));
    stream_->WritesDone();
    v1::ScanResponse resp;
    while (stream_->Read(&resp)) Append(resp);
    const grpc::Status s = stream_->Finish();
    EXPECT_TRUE(s.ok()) << "the valid call beside the bad one failed: " << s.error_message();
    EXPECT_EQ(got_, (testing::ScanRef<int64_t, ops::Sum<int64_t>>(x_, false))) << "the valid call's result is wrong";
  }

 private:
  std::string Chunk(int i) const {
    return std::string(reinterpret_cast<const char*>(x_.data() + i * kElems), kElems * sizeof(int64_t));
  }
  void Append(const v1::ScanResponse& resp) {
    const size_t n = resp.data().size() / sizeof(int64_t);
    const size_t at = got_.size();
    got_.resize(at + n);
    if (n) std::memcpy(got_.data() + at, resp.data().data(), n * sizeof(int64_t));
  }

  std::vector<int64_t> x_, got_;
  grpc::ClientContext ctx_;
  std::unique_ptr<grpc::ClientReaderWriter<v1::ScanRequest, v1::ScanResponse>> stream_;
};

class BadInputMatrix : public ::testing::TestWithParam<Row> {
 protected:
  static void SetUpTestSuite() { server_ = new TestServer(MatrixServerOptions()); }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }

  // Sends the row's requests on one call (stopping where the server has already failed it),
  // half-closes, drains the responses and returns the status.
  template <class Req, class Resp, class Start>
  static grpc::Status RunBidi(Start start, const std::vector<Req>& requests) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    auto stream = start(&ctx);
    for (const Req& r : requests) {
      if (!stream->Write(r)) break;
    }
    stream->WritesDone();
    Resp resp;
    while (stream->Read(&resp)) {
    }
    return stream->Finish();
  }

  template <class Req, class Start>
  static grpc::Status RunUnary(Start start, const std::vector<Req>& requests) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    auto writer = start(&ctx);
    for (const Req& r : requests) {
      if (!writer->Write(r)) break;
    }
    writer->WritesDone();
    return writer->Finish();
  }

  // A Reduce call whose requests are the given bytes, as they are, on the wire.
  static grpc::Status RunRawReduce(const std::vector<std::string>& messages) {
    auto channel = grpc::CreateChannel(server_->target(), grpc::InsecureChannelCredentials());
    grpc::internal::RpcMethod method("/gpuscan.v1.GpuScan/Reduce", grpc::internal::RpcMethod::CLIENT_STREAMING,
                                     channel);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    grpc::ByteBuffer response;
    std::unique_ptr<grpc::ClientWriter<grpc::ByteBuffer>> stream(
        grpc::internal::ClientWriterFactory<grpc::ByteBuffer>::Create(channel.get(), method, &ctx, &response));
    for (const std::string& m : messages) {
      grpc::Slice slice(m);
      if (!stream->Write(grpc::ByteBuffer(&slice, 1))) break;
    }
    stream->WritesDone();
    return stream->Finish();
  }

  // A bidirectional call (Scan, Compact) whose requests are the given bytes, as they are, on the wire.
  static grpc::Status RunRawBidi(const char* method_name, const std::vector<std::string>& messages) {
    auto channel = grpc::CreateChannel(server_->target(), grpc::InsecureChannelCredentials());
    grpc::internal::RpcMethod method(method_name, grpc::internal::RpcMethod::BIDI_STREAMING, channel);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    std::unique_ptr<grpc::ClientReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>> stream(
        grpc::internal::ClientReaderWriterFactory<grpc::ByteBuffer, grpc::ByteBuffer>::Create(channel.get(), method,
                                                                                            &ctx));
    for (const std::string& m : messages) {
      grpc::Slice slice(m);
      if (!stream->Write(grpc::ByteBuffer(&slice, 1))) break;
    }
    stream->WritesDone();
    grpc::ByteBuffer resp;
    while (stream->Read(&resp)) {
    }
    return stream->Finish();
  }

  static grpc::Status Send(v1::GpuScan::Stub& stub, const Row& row) {
    if (!row.raw.empty()) {
      switch (row.rpc) {
        case Rpc::kReduce: return RunRawReduce(row.raw);
        case Rpc::kCompact: return RunRawBidi("/gpuscan.v1.GpuScan/Compact", row.raw);
        default: return RunRawBidi("/gpuscan.v1.GpuScan/Scan", row.raw);
      }
    }
    switch (row.rpc) {
      case Rpc::kScan:
        return RunBidi<v1::ScanRequest, v1::ScanResponse>([&](grpc::ClientContext* c) { return stub.Scan(c); },
                                                          row.scan);
      case Rpc::kCompact:
        return RunBidi<v1::CompactRequest, v1::CompactResponse>(
            [&](grpc::ClientContext* c) { return stub.Compact(c); }, row.compact);
      case Rpc::kReduce: {
        v1::ReduceResponse resp;
        return RunUnary([&](grpc::ClientContext* c) { return stub.Reduce(c, &resp); }, row.reduce);
      }
      case Rpc::kHistogram: {
        v1::HistogramResponse resp;
        return RunUnary([&](grpc::ClientContext* c) { return stub.Histogram(c, &resp); }, row.histogram);
      }
      case Rpc::kSegmented:
        return RunBidi<v1::SegmentedScanRequest, v1::ScanResponse>(
            [&](grpc::ClientContext* c) { return stub.SegmentedScan(c); }, row.segmented);
      case Rpc::kReduceByKey:
        return RunBidi<v1::ReduceByKeyRequest, v1::ReduceByKeyResponse>(
            [&](grpc::ClientContext* c) { return stub.ReduceByKey(c); }, row.by_key);
      case Rpc::kSort:
        return RunBidi<v1::SortRequest, v1::SortResponse>([&](grpc::ClientContext* c) { return stub.Sort(c); },
                                                          row.sort);
      case Rpc::kScan2D:
        return RunBidi<v1::Scan2DRequest, v1::ScanResponse>([&](grpc::ClientContext* c) { return stub.Scan2D(c); },
                                                            row.scan2d);
    }
    return {grpc::StatusCode::INTERNAL, "unknown rpc"};
  }

  // The row as this server's engine needs it (the algorithm it lacks, for that one row).
  static Row Prepare(Row row) {
    if (!row.missing_algorithm) return row;
    const auto offered = server_->server().engine().scan_algorithms();
    for (int a = v1::ScanAlgorithm_MIN; a <= v1::ScanAlgorithm_MAX; ++a) {
      const auto ea = static_cast<engine::ScanAlgorithm>(a);
      if (std::find(offered.begin(), offered.end(), ea) != offered.end()) continue;
      row.scan[0].mutable_header()->set_algorithm(static_cast<v1::ScanAlgorithm>(a));
      row.expect.push_back("header.algorithm=" + std::string(engine::Name(ea)));
      row.expect.push_back(server_->server().engine().name() + " engine");
      return row;
    }
    ADD_FAILURE() << "the engine offers every scan algorithm; nothing to refuse";
    return row;
  }

  static void ExpectStatus(const Row& row, const grpc::Status& s) {
    EXPECT_EQ(s.error_code(), row.code) << row.name << ": message \"" << s.error_message() << "\"";
    EXPECT_FALSE(s.error_message().empty()) << row.name;
    for (const std::string& e : row.expect) {
      EXPECT_THAT(s.error_message(), HasSubstr(e)) << row.name;
    }
  }

  // A valid call of `rpc` on a fresh client, checked against the reference.
  static void ExpectValidCall(Rpc rpc) {
    Client client(server_->client_options(kChunkBytes));
    GPUSCAN_SEEDED_RNG(rng);
    const size_t n = 3 * kChunkBytes / sizeof(int32_t) + 5;  // several chunks, the last one short
    switch (rpc) {
      case Rpc::kScan: {
        const auto x = testing::RandomInput<int32_t, ops::Sum<int32_t>>(n, rng);
        ScanOptions o;
        o.exclusive = true;
        EXPECT_EQ(client.Scan(x, o).values, (testing::ScanRef<int32_t, ops::Sum<int32_t>>(x, true)));
        break;
      }
      case Rpc::kReduce: {
        const auto x = testing::RandomInput<uint64_t, ops::BitXor<uint64_t>>(n, rng);
        EXPECT_EQ(client.Reduce(x, v1::OPERATOR_BIT_XOR).value, (testing::ReduceRef<uint64_t, ops::BitXor<uint64_t>>(x)));
        break;
      }
      case Rpc::kCompact: {
        const auto x = testing::RandomCompactInput<int32_t>(n, rng);
        CompactOptions o;
        o.use_flags = true;
        o.flags = testing::RandomFlags(n, rng, 0.5);
        o.output = v1::COMPACT_OUTPUT_VALUES_AND_INDICES;
        const auto r = client.Compact(x, o);
        const auto ref = testing::CompactRef(x, o.flags);
        EXPECT_EQ(r.values, ref.values);
        EXPECT_EQ(r.indices, ref.indices);
        break;
      }
      case Rpc::kHistogram: {
        const auto x = testing::RandomInput<int64_t, ops::Sum<int64_t>>(n, rng);
        HistogramBins bins;
        bins.edges = {-1e6, -10, 0, 0, 7, 1e6};
        const HistogramResult r = client.Histogram(x, bins);
        std::vector<uint64_t> want = testing::HistogramRef(x, bins.edges);
        want.resize(5);  // the bins, without below/above/NaN
        EXPECT_EQ(r.counts, want);
        break;
      }
      case Rpc::kSegmented: {
        const auto x = testing::RandomInput<int32_t, ops::Sum<int32_t>>(n, rng);
        const auto keys = testing::RandomSegmentKeys<int64_t>(n, rng, 50);
        SegmentedScanOptions o;
        o.exclusive = true;
        EXPECT_EQ(client.SegmentedScan(x, keys, o).values,
                  (testing::SegmentedScanRef<int32_t, ops::Sum<int32_t>>(x, testing::HeadsOfKeys(keys), true)));
        break;
      }
      case Rpc::kReduceByKey: {
        const auto x = testing::RandomInput<int64_t, ops::Sum<int64_t>>(n, rng);
        const auto keys = testing::RandomSegmentKeys<uint32_t>(n, rng, 50);
        const auto r = client.ReduceByKey(x, keys, v1::OPERATOR_SUM);
        const auto want = testing::ReduceByKeyRef<int64_t, ops::Sum<int64_t>, uint32_t>(x, keys);
        EXPECT_EQ(r.keys, want.first);
        EXPECT_EQ(r.values, want.second);
        break;
      }
      case Rpc::kSort: {
        const auto x = testing::RandomInput<int32_t, ops::Sum<int32_t>>(n, rng);
        const auto r = client.SortPairs(x.data(), x.data(), n, true);
        std::vector<int32_t> want = x;
        std::sort(want.begin(), want.end(), std::greater<int32_t>());
        EXPECT_EQ(r.keys, want);
        EXPECT_EQ(r.values, want);
        break;
      }
      case Rpc::kScan2D: {
        const auto x = testing::RandomInput<int32_t, ops::Sum<int32_t>>(n, rng);
        const auto r = client.Scan2D(x.data(), n / 10, 10);
        const std::vector<int32_t> head(x.begin(), x.begin() + n / 10 * 10);
        EXPECT_EQ(r.values, (testing::Scan2DRef<int32_t, ops::Sum<int32_t>>(head, n / 10, 10)));
        break;
      }
    }
    EXPECT_EQ(client.Health(), "SERVING");
  }

  static TestServer* server_;
};
TestServer* BadInputMatrix::server_ = nullptr;

TEST_P(BadInputMatrix, RightCodeAndMessageWhileServingOthers) {
  const Row row = Prepare(GetParam());
  auto stub = server_->stub();
  InFlightScan valid(*stub);  // a valid call in progress on the same channel
  const grpc::Status s = Send(*stub, row);
  std::printf("%s -> %s: %s\n", row.name.c_str(), StatusCodeName(s.error_code()).c_str(), s.error_message().c_str());
  ExpectStatus(row, s);
  valid.Finish();
  ExpectValidCall(row.rpc);  // and the server keeps serving
}

INSTANTIATE_TEST_SUITE_P(Rows, BadInputMatrix, ::testing::ValuesIn(Rows()),
                         [](const ::testing::TestParamInfo<Row>& info) { return info.param.name; });

// Every row at once, one thread each, with valid calls of every RPC running beside them.
TEST_F(BadInputMatrix, AllRowsAtOnce) {
  const std::vector<Row> rows = Rows();
  std::vector<grpc::Status> got(rows.size());
  std::atomic<bool> stop{false};
  std::atomic<int> valid_calls{0};
  std::vector<std::thread> valid;
  for (Rpc rpc : {Rpc::kScan, Rpc::kReduce, Rpc::kCompact, Rpc::kHistogram, Rpc::kSegmented, Rpc::kReduceByKey, Rpc::kSort}) {
    valid.emplace_back([&, rpc] {
      while (!stop) {
        ExpectValidCall(rpc);
        ++valid_calls;
      }
    });
  }
  std::vector<std::thread> bad;
  for (size_t i = 0; i < rows.size(); ++i) {
    bad.emplace_back([&, i] {
      auto stub = server_->stub();
      got[i] = Send(*stub, Prepare(rows[i]));
    });
  }
  for (auto& t : bad) t.join();
  stop = true;
  for (auto& t : valid) t.join();
  for (size_t i = 0; i < rows.size(); ++i) ExpectStatus(Prepare(rows[i]), got[i]);
  EXPECT_GE(valid_calls.load(), 3);
}

}  // namespace gpuscan::matrix
