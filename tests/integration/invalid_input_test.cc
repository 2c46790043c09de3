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

  // A PutArray of int32 `data` (declared count, chunks of kChunkBytes) on the raw stub.
  static grpc::Status PutArray(v1::GpuScan::Stub& stub, const std::string& data, v1::ArrayInfo* info) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    auto writer = stub.PutArray(&ctx, info);
    v1::PutArrayRequest head;
    head.mutable_header()->set_dtype(v1::DTYPE_INT32);
    head.mutable_header()->set_element_count(data.size() / 4);
    head.mutable_header()->set_label("matrix");
    writer->Write(head);
    for (size_t at = 0; at < data.size(); at += kChunkBytes) {
      v1::PutArrayRequest chunk;
      chunk.set_data(data.substr(at, kChunkBytes));
      if (!writer->Write(chunk)) break;
    }
    writer->WritesDone();
    return writer->Finish();
  }
  static grpc::Status DropArray(v1::GpuScan::Stub& stub, const std::string& id) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    v1::DropArrayRequest req;
    req.set_id(id);
    v1::DropArrayResponse resp;
    return stub.DropArray(&ctx, req, &resp);
  }
  // GetArray of [offset, offset + count) (count < 0: to the end), the data concatenated.
  static grpc::Status GetArray(v1::GpuScan::Stub& stub, const std::string& id, uint64_t offset, int64_t count,
                               std::string* data) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    v1::GetArrayRequest req;
    req.set_id(id);
    req.set_offset(offset);
    if (count >= 0) req.set_count(static_cast<uint64_t>(count));
    auto reader = stub.GetArray(&ctx, req);
    v1::GetArrayResponse resp;
    data->clear();
    uint64_t next = offset;
    while (reader->Read(&resp)) {
      EXPECT_EQ(resp.offset(), next) << "GetArray's responses out of order";
      next += resp.data().size() / 4;
      *data += resp.data();
    }
    return reader->Finish();
  }

  // The resident RPCs' valid call: random int32 put, read back whole and in part, listed,
  // scanned and reduced where it lies (against the reference), dropped, then gone.
  static void ExpectValidResidentCalls(std::mt19937_64& rng, size_t n) {
    auto stub = server_->stub();
    const auto x = testing::RandomInput<int32_t, ops::Sum<int32_t>>(n, rng);
    const std::string bytes(reinterpret_cast<const char*>(x.data()), n * 4);
    v1::ArrayInfo info;
    const grpc::Status put = PutArray(*stub, bytes, &info);
    ASSERT_TRUE(put.ok()) << "the valid PutArray failed: " << put.error_message();
    EXPECT_EQ(info.dtype(), v1::DTYPE_INT32);
    EXPECT_EQ(info.element_count(), n);
    EXPECT_EQ(info.bytes(), n * 4);
    EXPECT_EQ(info.label(), "matrix");
    std::string got;
    EXPECT_TRUE(GetArray(*stub, info.id(), 0, -1, &got).ok());
    EXPECT_TRUE(got == bytes) << "GetArray gave back other bytes than were put";
    EXPECT_TRUE(GetArray(*stub, info.id(), 7, 1000, &got).ok());
    EXPECT_TRUE(got == bytes.substr(7 * 4, 1000 * 4)) << "GetArray of a range gave back other bytes";
    {
      grpc::ClientContext ctx;
      v1::ListArraysResponse list;
      EXPECT_TRUE(stub->ListArrays(&ctx, v1::ListArraysRequest(), &list).ok());
      EXPECT_TRUE(std::any_of(list.arrays().begin(), list.arrays().end(),
                              [&](const v1::ArrayInfo& a) { return a.id() == info.id(); }))
          << "ListArrays lacks the put array";
      EXPECT_EQ(list.budget_bytes(), kResidentBytes);
    }
    {
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
      auto stream = stub->Scan(&ctx);
      v1::ScanRequest head = ScanHead(v1::DTYPE_INT32);
      head.mutable_header()->mutable_resident()->set_values(info.id());
      stream->Write(head);
      stream->WritesDone();
      v1::ScanResponse resp;
      std::vector<int32_t> scanned;
      while (stream->Read(&resp)) {
        const size_t at = scanned.size();
        scanned.resize(at + resp.data().size() / 4);
        if (!resp.data().empty()) std::memcpy(scanned.data() + at, resp.data().data(), resp.data().size());
      }
      const grpc::Status s = stream->Finish();
      EXPECT_TRUE(s.ok()) << "the valid resident Scan failed: " << s.error_message();
      EXPECT_EQ(scanned, (testing::ScanRef<int32_t, ops::Sum<int32_t>>(x, false)));
    }
    {
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
      v1::ReduceResponse resp;
      auto writer = stub->Reduce(&ctx, &resp);
      v1::ReduceRequest head = ReduceHead(v1::DTYPE_INT32, v1::OPERATOR_MAX);
      head.mutable_header()->mutable_resident()->set_values(info.id());
      writer->Write(head);
      writer->WritesDone();
      const grpc::Status s = writer->Finish();
      EXPECT_TRUE(s.ok()) << "the valid resident Reduce failed: " << s.error_message();
      EXPECT_EQ(resp.value().int_value(), (testing::ReduceRef<int32_t, ops::Max<int32_t>>(x)));
    }
    EXPECT_TRUE(DropArray(*stub, info.id()).ok());
    EXPECT_EQ(GetArray(*stub, info.id(), 0, -1, &got).error_code(), grpc::StatusCode::NOT_FOUND);
  }

  // Pipeline's valid call: a random int32 array put; compact(x > 0) of it, the scan of what it
  // kept (returned), the max of that scan, and the sum of the same data streamed in: each stage
  // against the reference; then the array dropped.
  static void ExpectValidPipeline(std::mt19937_64& rng, size_t n) {
    auto stub = server_->stub();
    const auto x = testing::RandomInput<int32_t, ops::Sum<int32_t>>(n, rng);
    const std::string bytes(reinterpret_cast<const char*>(x.data()), n * 4);
    v1::ArrayInfo info;
    const grpc::Status put = PutArray(*stub, bytes, &info);
    ASSERT_TRUE(put.ok()) << "the valid PutArray failed: " << put.error_message();
    v1::PipelineRequest head;
    v1::PipelineHeader* h = head.mutable_header();
    h->mutable_input()->set_dtype(v1::DTYPE_INT32);
    h->mutable_input()->set_element_count(n);
    v1::PipelineStage* compact = h->add_stages();
    compact->mutable_compact()->set_dtype(v1::DTYPE_INT32);
    compact->mutable_compact()->mutable_predicate()->set_op(v1::PREDICATE_OP_GT);
    compact->mutable_compact()->mutable_predicate()->mutable_threshold()->set_int_value(0);
    compact->mutable_values()->set_id(info.id());
    v1::PipelineStage* scan = h->add_stages();
    scan->mutable_scan()->set_dtype(v1::DTYPE_INT32);
    scan->mutable_scan()->set_op(v1::OPERATOR_SUM);
    scan->mutable_values()->set_stage(0);
    scan->set_returns(v1::STAGE_RETURN_DATA);
    v1::PipelineStage* max = h->add_stages();
    max->mutable_reduce()->set_dtype(v1::DTYPE_INT32);
    max->mutable_reduce()->set_op(v1::OPERATOR_MAX);
    max->mutable_values()->set_stage(1);
    v1::PipelineStage* sum = h->add_stages();
    sum->mutable_reduce()->set_dtype(v1::DTYPE_INT32);
    sum->mutable_reduce()->set_op(v1::OPERATOR_SUM);
    sum->mutable_values()->set_streamed(true);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    auto stream = stub->Pipeline(&ctx);
    stream->Write(head);
    for (size_t at = 0; at < bytes.size(); at += kChunkBytes) {
      v1::PipelineRequest chunk;
      chunk.set_data(bytes.substr(at, kChunkBytes));
      if (!stream->Write(chunk)) break;
    }
    stream->WritesDone();
    std::vector<int32_t> scanned;
    v1::PipelineResponse resp;
    int64_t max_value = 0, sum_value = 0;
    uint32_t last = 0;
    while (stream->Read(&resp)) {
      last = resp.stage();
      if (resp.stage() == 1 && !resp.scan().data().empty()) {
        const size_t at = scanned.size();
        scanned.resize(at + resp.scan().data().size() / 4);
        std::memcpy(scanned.data() + at, resp.scan().data().data(), resp.scan().data().size());
      }
      if (resp.stage() == 2 && resp.has_reduce()) max_value = resp.reduce().value().int_value();
      if (resp.stage() == 3 && resp.has_reduce()) sum_value = resp.reduce().value().int_value();
    }
    const grpc::Status s = stream->Finish();
    EXPECT_TRUE(s.ok()) << "the valid Pipeline failed: " << s.error_message();
    EXPECT_EQ(last, 4u) << "no final response with the pipeline's Timing";
    std::vector<int32_t> kept;
    for (int32_t v : x) {
      if (v > 0) kept.push_back(v);
    }
    const auto want = testing::ScanRef<int32_t, ops::Sum<int32_t>>(kept, false);
    EXPECT_EQ(scanned, want) << "the pipeline's scan of the compaction is wrong";
    if (!want.empty()) EXPECT_EQ(max_value, (testing::ReduceRef<int32_t, ops::Max<int32_t>>(want)));
    EXPECT_EQ(sum_value, (testing::ReduceRef<int32_t, ops::Sum<int32_t>>(x))) << "the streamed input's sum is wrong";
    EXPECT_TRUE(DropArray(*stub, info.id()).ok());
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
      case Rpc::kPutArray:
      case Rpc::kGetArray:
      case Rpc::kDropArray:
      case Rpc::kListArrays:
        ExpectValidResidentCalls(rng, n);
        break;
      case Rpc::kPipeline:
        ExpectValidPipeline(rng, n);
        break;
    }
    EXPECT_EQ(client.Health(), "SERVING");
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
  for (Rpc rpc : {Rpc::kScan, Rpc::kReduce, Rpc::kCompact, Rpc::kHistogram, Rpc::kSegmented, Rpc::kReduceByKey, Rpc::kSort,
                  Rpc::kPutArray, Rpc::kPipeline}) {
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
  ExpectForeignArrayKept();
  EXPECT_GE(valid_calls.load(), 3);
}

}  // namespace gpuscan::matrix
