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
// The rows are in invalid_input_*_rows.cc, by family; invalid_input_matrix.h builds them; the valid
// calls that follow them are in invalid_input_valid_calls.cc.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <functional>
#include <mutex>
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
  CarryRows(rows);
  ResidentRows(rows);
  ResidentMemoryRows(rows);
  ResidentKeyedRows(rows);
  ResidentSelectRows(rows);
  PipelineRows(rows);
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
    std::lock_guard<std::mutex> lock(resident_mu_);
    epoch_.clear();
    foreign_id_.clear();
  }

  // A call's context: a deadline, and the row's metadata.
  static void InitContext(grpc::ClientContext* ctx, const Row& row) {
    ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    for (const auto& [key, value] : row.metadata) ctx->AddMetadata(key, value);
  }

  // Sends the row's requests on one call (stopping where the server has already failed it),
  // half-closes, drains the responses and returns the status.
  template <class Req, class Resp, class Start>
  static grpc::Status RunBidi(const Row& row, Start start, const std::vector<Req>& requests) {
    grpc::ClientContext ctx;
    InitContext(&ctx, row);
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
  static grpc::Status RunUnary(const Row& row, Start start, const std::vector<Req>& requests) {
    grpc::ClientContext ctx;
    InitContext(&ctx, row);
    auto writer = start(&ctx);
    for (const Req& r : requests) {
      if (!writer->Write(r)) break;
    }
    writer->WritesDone();
    return writer->Finish();
  }

  // A client-streaming call (Reduce, PutArray) whose requests are the given bytes, as they are, on the wire.
  static grpc::Status RunRawClientStreaming(const char* method_name, const std::vector<std::string>& messages) {
    auto channel = grpc::CreateChannel(server_->target(), grpc::InsecureChannelCredentials());
    grpc::internal::RpcMethod method(method_name, grpc::internal::RpcMethod::CLIENT_STREAMING, channel);
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
        case Rpc::kReduce: return RunRawClientStreaming("/gpuscan.v1.GpuScan/Reduce", row.raw);
        case Rpc::kPutArray: return RunRawClientStreaming("/gpuscan.v1.GpuScan/PutArray", row.raw);
        case Rpc::kCompact: return RunRawBidi("/gpuscan.v1.GpuScan/Compact", row.raw);
        default: return RunRawBidi("/gpuscan.v1.GpuScan/Scan", row.raw);
      }
    }
    switch (row.rpc) {
      case Rpc::kScan:
        return RunBidi<v1::ScanRequest, v1::ScanResponse>(row, [&](grpc::ClientContext* c) { return stub.Scan(c); },
                                                          row.scan);
      case Rpc::kCompact:
        return RunBidi<v1::CompactRequest, v1::CompactResponse>(
            row, [&](grpc::ClientContext* c) { return stub.Compact(c); }, row.compact);
      case Rpc::kReduce: {
        v1::ReduceResponse resp;
        return RunUnary(row, [&](grpc::ClientContext* c) { return stub.Reduce(c, &resp); }, row.reduce);
      }
      case Rpc::kHistogram: {
        v1::HistogramResponse resp;
        return RunUnary(row, [&](grpc::ClientContext* c) { return stub.Histogram(c, &resp); }, row.histogram);
      }
      case Rpc::kSegmented:
        return RunBidi<v1::SegmentedScanRequest, v1::ScanResponse>(
            row, [&](grpc::ClientContext* c) { return stub.SegmentedScan(c); }, row.segmented);
      case Rpc::kReduceByKey:
        return RunBidi<v1::ReduceByKeyRequest, v1::ReduceByKeyResponse>(
            row, [&](grpc::ClientContext* c) { return stub.ReduceByKey(c); }, row.by_key);
      case Rpc::kSort:
        return RunBidi<v1::SortRequest, v1::SortResponse>(row, [&](grpc::ClientContext* c) { return stub.Sort(c); },
                                                          row.sort);
      case Rpc::kScan2D:
        return RunBidi<v1::Scan2DRequest, v1::ScanResponse>(row, [&](grpc::ClientContext* c) { return stub.Scan2D(c); },
                                                            row.scan2d);
      case Rpc::kPutArray: {
        v1::ArrayInfo info;
        return RunUnary(row, [&](grpc::ClientContext* c) { return stub.PutArray(c, &info); }, row.put);
      }
      case Rpc::kGetArray: {
        grpc::ClientContext ctx;
        InitContext(&ctx, row);
        auto reader = stub.GetArray(&ctx, row.get);
        v1::GetArrayResponse resp;
        while (reader->Read(&resp)) {
        }
        return reader->Finish();
      }
      case Rpc::kDropArray: {
        grpc::ClientContext ctx;
        InitContext(&ctx, row);
        v1::DropArrayResponse resp;
        return stub.DropArray(&ctx, row.drop, &resp);
      }
      case Rpc::kListArrays: {
        grpc::ClientContext ctx;
        InitContext(&ctx, row);
        v1::ListArraysResponse resp;
        return stub.ListArrays(&ctx, row.list, &resp);
      }
      case Rpc::kPipeline:
        return RunBidi<v1::PipelineRequest, v1::PipelineResponse>(
            row, [&](grpc::ClientContext* c) { return stub.Pipeline(c); }, row.pipeline);
    }
    return {grpc::StatusCode::INTERNAL, "unknown rpc"};
  }

  // This server run's epoch: the last 8 bytes of every id it issues (those of a put array).
  // (Each suite has a server of its own, and so an epoch: learned once a suite, under resident_mu_.)
  static std::string Epoch() {
    std::lock_guard<std::mutex> lock(resident_mu_);
    if (epoch_.empty()) {
      auto stub = server_->stub();
      v1::ArrayInfo info;
      const std::string id = PutArray(*stub, std::string(16, '\x01'), &info).ok() ? info.id() : std::string();
      EXPECT_EQ(id.size(), 24u) << "no array to learn the server's epoch from";
      DropArray(*stub, id);
      epoch_ = id.size() == 24 ? id.substr(16) : std::string(8, '\0');
    }
    return epoch_;
  }

  // An array of the default tenant, put once and kept: the rows of another tenant name it.
  static std::string ForeignArrayId() {
    std::lock_guard<std::mutex> lock(resident_mu_);
    if (foreign_id_.empty()) {
      auto stub = server_->stub();
      v1::ArrayInfo info;
      EXPECT_TRUE(PutArray(*stub, std::string(64, '\x02'), &info).ok()) << "no array for the other-tenant rows";
      foreign_id_ = info.id();
    }
    return foreign_id_;
  }
  static void ExpectForeignArrayKept() {
    auto stub = server_->stub();
    std::string got;
    const grpc::Status s = GetArray(*stub, ForeignArrayId(), 0, -1, &got);
    EXPECT_TRUE(s.ok() && got == std::string(64, '\x02'))
        << "another tenant's row changed the default tenant's array: " << s.error_message();
  }

  // The row as this server needs it: the algorithm its engine lacks, its epoch or an array of
  // the default tenant in a resident id.
  static Row Prepare(Row row) {
    if (row.rpc == Rpc::kPipeline) return PreparePipeline(std::move(row));
    if (row.same_epoch || row.foreign_id) {
      std::string* id = row.rpc == Rpc::kGetArray    ? row.get.mutable_id()
                        : row.rpc == Rpc::kDropArray ? row.drop.mutable_id()
                        : row.rpc == Rpc::kReduce    ? row.reduce[0].mutable_header()->mutable_resident()->mutable_values()
                                                     : row.scan[0].mutable_header()->mutable_resident()->mutable_values();
      if (row.foreign_id) {
        *id = ForeignArrayId();
      } else if (id->size() >= 8) {
        id->replace(id->size() - 8, 8, Epoch());
      }
    }
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

  // A Pipeline row: every stage input id that is kPreparedStageId gets this run's epoch or becomes
  // the default tenant's array; the missing algorithm goes in stage 0's scan.
  static Row PreparePipeline(Row row) {
    for (v1::PipelineRequest& req : row.pipeline) {
      if (!req.has_header()) continue;
      for (v1::PipelineStage& stage : *req.mutable_header()->mutable_stages()) {
        auto prepare = [&](bool has, v1::StageInput* (v1::PipelineStage::*input)()) {
          if (!has) return;  // (mutable_* would set an input the row leaves out)
          v1::StageInput* in = (stage.*input)();
          if (in->source_case() != v1::StageInput::kId || in->id() != kPreparedStageId) return;
          if (row.foreign_id) {
            in->set_id(ForeignArrayId());
          } else if (row.same_epoch) {
            in->mutable_id()->replace(16, 8, Epoch());
          }
        };
        prepare(stage.has_values(), &v1::PipelineStage::mutable_values);
        prepare(stage.has_flags(), &v1::PipelineStage::mutable_flags);
        prepare(stage.has_keys(), &v1::PipelineStage::mutable_keys);
        prepare(stage.has_sort_values(), &v1::PipelineStage::mutable_sort_values);
      }
    }
    if (!row.missing_algorithm) return row;
    const auto offered = server_->server().engine().scan_algorithms();
    for (int a = v1::ScanAlgorithm_MIN; a <= v1::ScanAlgorithm_MAX; ++a) {
      const auto ea = static_cast<engine::ScanAlgorithm>(a);
      if (std::find(offered.begin(), offered.end(), ea) != offered.end()) continue;
      row.pipeline[0].mutable_header()->mutable_stages(0)->mutable_scan()->set_algorithm(static_cast<v1::ScanAlgorithm>(a));
      row.expect.push_back(std::string(engine::Name(ea)) + " is not available on the " +
                           server_->server().engine().name() + " engine");
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

  static TestServer* server_;
  static std::mutex resident_mu_;
  static std::string epoch_, foreign_id_;  // this suite's server's (Epoch, ForeignArrayId)
};
TestServer* BadInputMatrix::server_ = nullptr;
std::mutex BadInputMatrix::resident_mu_;
std::string BadInputMatrix::epoch_, BadInputMatrix::foreign_id_;

TEST_P(BadInputMatrix, RightCodeAndMessageWhileServingOthers) {
  const Row row = Prepare(GetParam());
  auto stub = server_->stub();
  InFlightScan valid(*stub);  // a valid call in progress on the same channel
  const grpc::Status s = Send(*stub, row);
  std::printf("%s -> %s: %s\n", row.name.c_str(), StatusCodeName(s.error_code()).c_str(), s.error_message().c_str());
  ExpectStatus(row, s);
  if (row.foreign_id) ExpectForeignArrayKept();
  valid.Finish();
  ExpectValidCall(*server_, row.rpc);  // and the server keeps serving
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
  for (Rpc rpc : {Rpc::kScan, Rpc::kReduce, Rpc::kCompact, Rpc::kHistogram, Rpc::kSegmented, Rpc::kReduceByKey, Rpc::kSort,
                  Rpc::kPutArray, Rpc::kPipeline}) {
    valid.emplace_back([&, rpc] {
      while (!stop) {
        ExpectValidCall(*server_, rpc);
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
  ExpectForeignArrayKept();
  EXPECT_GE(valid_calls.load(), 3);
}

}  // namespace gpuscan::matrix
