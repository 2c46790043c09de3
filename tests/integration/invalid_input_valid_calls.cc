// The bad input matrix's valid calls (invalid_input_test.cc): after each row, a valid call of the
// row's RPC on a fresh client, checked against the reference, shows the server keeps serving;
// and the raw PutArray, GetArray and DropArray the resident rows need.
#include <chrono>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "engine/types.h"
#include "invalid_input_matrix.h"
#include "reference.h"
#include "test_server.h"

namespace gpuscan::matrix {

using testing::TestServer;

// A PutArray of int32 `data` (declared count, chunks of kChunkBytes) on the raw stub.
grpc::Status PutArray(v1::GpuScan::Stub& stub, const std::string& data, v1::ArrayInfo* info) {
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
grpc::Status DropArray(v1::GpuScan::Stub& stub, const std::string& id) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  v1::DropArrayRequest req;
  req.set_id(id);
  v1::DropArrayResponse resp;
  return stub.DropArray(&ctx, req, &resp);
}
// GetArray of [offset, offset + count) (count < 0: to the end), the data concatenated.
grpc::Status GetArray(v1::GpuScan::Stub& stub, const std::string& id, uint64_t offset, int64_t count,
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
static void ExpectValidResidentCalls(TestServer& server, std::mt19937_64& rng, size_t n) {
  auto stub = server.stub();
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
static void ExpectValidPipeline(TestServer& server, std::mt19937_64& rng, size_t n) {
  auto stub = server.stub();
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
void ExpectValidCall(TestServer& server, Rpc rpc) {
  Client client(server.client_options(kChunkBytes));
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
      ExpectValidResidentCalls(server, rng, n);
      break;
    case Rpc::kPipeline:
      ExpectValidPipeline(server, rng, n);
      break;
  }
  EXPECT_EQ(client.Health(), "SERVING");
}

}  // namespace gpuscan::matrix
