// Pipelines with narrow stages (int8, uint8, int16, uint16, float16), through the raw stub against
// an in-process server: each stage equals its operation's own call (resident, or streamed on what
// the stage before made) bit for bit, on random data (float16 finite, so sums stay numbers) and
// sizes around the server's chunk; a later stage reads a stage's array in its real dtype (a
// narrow scan's wide or FLOAT16 result, a compaction's or sort's narrow values); the widened
// copies leave nothing behind.
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "pipeline_fixture.h"

namespace gpuscan::testing::pipeline_narrow {

using namespace resident;  // NOLINT: the fixture's helpers

const v1::DType kNarrowDTypes[] = {v1::DTYPE_INT8, v1::DTYPE_UINT8, v1::DTYPE_INT16, v1::DTYPE_UINT16,
                                   v1::DTYPE_FLOAT16};

size_t NarrowSize(v1::DType d) { return d == v1::DTYPE_INT8 || d == v1::DTYPE_UINT8 ? 1 : 2; }

// Random elements; float16 finite (|x| in [2^-5, 8), either sign).
std::string NarrowElements(v1::DType dtype, uint64_t n, uint32_t seed) {
  if (dtype != v1::DTYPE_FLOAT16) return RandomBytes(n * NarrowSize(dtype), seed);
  std::mt19937 rng(seed);
  std::string s(n * 2, '\0');
  for (uint64_t i = 0; i < n; ++i) {
    const uint16_t h = static_cast<uint16_t>(((rng() & 1) << 15) | ((10 + rng() % 8) << 10) | (rng() & 0x3ff));
    std::memcpy(&s[i * 2], &h, 2);
  }
  return s;
}

// The dtype of a scan of a narrow dtype with output_dtype unset: numpy's rule.
v1::DType ScanResult(v1::DType d) {
  if (d == v1::DTYPE_FLOAT16) return v1::DTYPE_FLOAT16;
  return d == v1::DTYPE_INT8 || d == v1::DTYPE_INT16 ? v1::DTYPE_INT64 : v1::DTYPE_UINT64;
}

// ---- the operations' own resident calls (header.resident set by the caller): the final
// response, or the data streamed back.
template <class Req, class Resp, class Start, class Header>
std::vector<Resp> Call(Start start, const Header& h, grpc::Status* status) {
  grpc::ClientContext ctx;
  auto stream = start(&ctx);
  Req req;
  *req.mutable_header() = h;
  stream->Write(req);
  stream->WritesDone();
  std::vector<Resp> out;
  Resp r;
  while (stream->Read(&r)) out.push_back(r);
  *status = stream->Finish();
  EXPECT_TRUE(status->ok()) << status->error_message();
  return out;
}

v1::CompactResponse CompactKept(v1::GpuScan::Stub& stub, const v1::CompactHeader& h) {
  grpc::Status s;
  auto out = Call<v1::CompactRequest, v1::CompactResponse>([&](auto* c) { return stub.Compact(c); }, h, &s);
  return out.empty() ? v1::CompactResponse() : out.back();
}
v1::SortResponse SortKept(v1::GpuScan::Stub& stub, const v1::SortHeader& h) {
  grpc::Status s;
  auto out = Call<v1::SortRequest, v1::SortResponse>([&](auto* c) { return stub.Sort(c); }, h, &s);
  return out.empty() ? v1::SortResponse() : out.back();
}
std::string SegmentedData(v1::GpuScan::Stub& stub, const v1::SegmentedScanHeader& h) {
  grpc::Status s;
  std::string data;
  for (const auto& r : Call<v1::SegmentedScanRequest, v1::ScanResponse>(
           [&](auto* c) { return stub.SegmentedScan(c); }, h, &s)) {
    data += r.data();
  }
  return data;
}
v1::HistogramResponse HistogramOf(v1::GpuScan::Stub& stub, const v1::HistogramHeader& h) {
  grpc::ClientContext ctx;
  v1::HistogramResponse resp;
  auto writer = stub.Histogram(&ctx, &resp);
  v1::HistogramRequest req;
  *req.mutable_header() = h;
  writer->Write(req);
  writer->WritesDone();
  const grpc::Status s = writer->Finish();
  EXPECT_TRUE(s.ok()) << s.error_message();
  return resp;
}

class PipelineNarrowTest : public ::testing::Test {
 protected:
  v1::ListArraysResponse List() {
    grpc::ClientContext ctx;
    v1::ListArraysResponse r;
    EXPECT_TRUE(stub_->ListArrays(&ctx, {}, &r).ok());
    return r;
  }
  TestServer server_{ResidentOptions()};
  std::unique_ptr<v1::GpuScan::Stub> stub_ = server_.stub();
};

// compact(x > t) -> scan (wide or FLOAT16 result, returned) -> reduce (MAX) of the scan; and a
// reduce (SUM) and a histogram of the compacted narrow values: each stage its own call's bits.
TEST_F(PipelineNarrowTest, CompactScanReduceHistogramEqualTheOperationsCalls) {
  uint32_t seed = 5100;
  for (v1::DType dtype : kNarrowDTypes) {
    const uint64_t per = kChunk / NarrowSize(dtype);
    for (uint64_t n : {uint64_t{0}, uint64_t{1}, per - 1, per + 1, 3 * per + 5}) {
      SCOPED_TRACE(v1::DType_Name(dtype) + " n=" + std::to_string(n));
      const std::string data = NarrowElements(dtype, n, seed++);
      const std::string id = PutId(*stub_, dtype, data);
      v1::CompactHeader ch;
      ch.set_dtype(dtype);
      ch.set_output(v1::COMPACT_OUTPUT_VALUES_AND_INDICES);
      ch.mutable_predicate()->set_op(v1::PREDICATE_OP_GT);
      if (dtype == v1::DTYPE_FLOAT16) {
        ch.mutable_predicate()->mutable_threshold()->set_float_value(0.0);
      } else if (dtype == v1::DTYPE_UINT8 || dtype == v1::DTYPE_UINT16) {
        ch.mutable_predicate()->mutable_threshold()->set_uint_value(dtype == v1::DTYPE_UINT8 ? 100 : 30000);
      } else {
        ch.mutable_predicate()->mutable_threshold()->set_int_value(-3);
      }
      v1::ScanHeader sh;
      sh.set_dtype(dtype);
      sh.set_op(v1::OPERATOR_SUM);
      v1::ReduceHeader max;
      max.set_dtype(ScanResult(dtype));
      max.set_op(v1::OPERATOR_MAX);
      v1::ReduceHeader sum;
      sum.set_dtype(dtype);
      sum.set_op(v1::OPERATOR_SUM);
      v1::HistogramHeader hh;
      hh.set_dtype(dtype);
      hh.set_bins(7);
      hh.set_lo(-5);
      hh.set_hi(200);

      v1::PipelineHeader h;
      v1::PipelineStage* s = h.add_stages();
      *s->mutable_compact() = ch;
      *s->mutable_values() = FromId(id);
      s->set_returns(v1::STAGE_RETURN_DATA);
      s = h.add_stages();
      *s->mutable_scan() = sh;
      *s->mutable_values() = FromStage(0);
      s->set_returns(v1::STAGE_RETURN_DATA);
      s = h.add_stages();
      *s->mutable_reduce() = max;
      *s->mutable_values() = FromStage(1);
      s = h.add_stages();
      *s->mutable_reduce() = sum;
      *s->mutable_values() = FromStage(0);
      s = h.add_stages();
      *s->mutable_histogram() = hh;
      *s->mutable_values() = FromStage(0);
      const PipelineRun run = RunPipeline(*stub_, h);
      ASSERT_TRUE(run.status.ok()) << run.status.error_message();

      // The same operations called one by one.
      ch.mutable_resident()->set_values(id);
      ch.mutable_resident()->set_keep(true);
      const v1::CompactResponse kept = CompactKept(*stub_, ch);
      const std::string k = GetAll(*stub_, kept.values_array().id());
      EXPECT_EQ(run.Final(0).compact().kept_count(), kept.kept_count());
      EXPECT_TRUE(run.Data(0) == k) << "the compact stage differs from the resident compact";
      if (n > 100) ASSERT_GT(kept.kept_count(), 10u);
      sh.mutable_resident()->set_values(kept.values_array().id());
      std::string scanned;
      ASSERT_TRUE(Scan(*stub_, sh, nullptr, &scanned).ok());
      EXPECT_TRUE(run.Data(1) == scanned) << "the scan stage differs from the resident scan";
      std::string raw;
      ASSERT_TRUE(Reduce(*stub_, max, &scanned, &raw).ok());  // streamed: the scan is no array
      EXPECT_EQ(run.Final(2).reduce().raw_value(), raw);
      sum.mutable_resident()->set_values(kept.values_array().id());
      ASSERT_TRUE(Reduce(*stub_, sum, nullptr, &raw).ok());
      EXPECT_EQ(run.Final(3).reduce().raw_value(), raw);
      EXPECT_EQ(raw.size(), dtype == v1::DTYPE_FLOAT16 ? 2u : 8u);
      hh.mutable_resident()->set_values(kept.values_array().id());
      const v1::HistogramResponse hist = HistogramOf(*stub_, hh);
      EXPECT_EQ(run.Final(4).histogram().counts(), hist.counts());
      EXPECT_EQ(run.Final(4).histogram().below(), hist.below());
      EXPECT_EQ(run.Final(4).histogram().above(), hist.above());
      for (const std::string& drop : {kept.values_array().id(), kept.indices_array().id()}) {
        grpc::ClientContext ctx;
        v1::DropArrayRequest req;
        req.set_id(drop);
        v1::DropArrayResponse resp;
        ASSERT_TRUE(stub_->DropArray(&ctx, req, &resp).ok());
      }
    }
  }
  const v1::ListArraysResponse list = List();  // held: the loop reads its arrays
  uint64_t inputs = 0;
  for (const auto& a : list.arrays()) inputs += a.bytes();
  EXPECT_EQ(list.arrays_size(), static_cast<int>(std::size(kNarrowDTypes) * 5)) << "the inputs only";
  EXPECT_EQ(list.used_bytes(), inputs) << "the widened copies and the intermediates left nothing";
}

// sort (uint16 keys, float16 values) -> segmented scan of the moved float16 values by head flags
// (FLOAT16 result) and of the sorted uint16 keys by int32 keys (UINT32 result, kept): each as the
// operations' own resident calls.
TEST_F(PipelineNarrowTest, SortUint16ThenSegmentedScansEqualTheOperationsCalls) {
  uint32_t seed = 5200;
  for (uint64_t n : {uint64_t{0}, uint64_t{1}, uint64_t{kChunk / 2 - 1}, uint64_t{kChunk / 2 + 1}, uint64_t{6000}}) {
    SCOPED_TRACE("n=" + std::to_string(n));
    std::mt19937 rng(seed++);
    std::vector<uint16_t> keys(n);
    std::vector<int32_t> segs(n);
    std::string flags(n, '\0');
    for (uint64_t i = 0; i < n; ++i) {
      keys[i] = static_cast<uint16_t>(rng() % 50 + 65000);  // ties: the order the sort keeps them in counts
      segs[i] = static_cast<int32_t>(i / 37);
      flags[i] = rng() % 8 == 0 ? 1 : 0;
    }
    const std::string kbytes(reinterpret_cast<const char*>(keys.data()), n * 2);
    const std::string vbytes = NarrowElements(v1::DTYPE_FLOAT16, n, seed++);
    const std::string kid = PutId(*stub_, v1::DTYPE_UINT16, kbytes), vid = PutId(*stub_, v1::DTYPE_FLOAT16, vbytes);
    const std::string fid = PutId(*stub_, v1::DTYPE_UINT8, flags);
    const std::string sid = PutId(*stub_, v1::DTYPE_INT32, std::string(reinterpret_cast<const char*>(segs.data()), n * 4));
    v1::SortHeader so;
    so.set_dtype(v1::DTYPE_UINT16);
    so.set_output(v1::SORT_OUTPUT_KEYS_AND_VALUES);
    so.set_values_dtype(v1::DTYPE_FLOAT16);
    v1::SegmentedScanHeader by_heads;
    by_heads.set_dtype(v1::DTYPE_FLOAT16);
    by_heads.set_op(v1::OPERATOR_SUM);
    by_heads.set_heads(true);
    v1::SegmentedScanHeader by_keys;
    by_keys.set_dtype(v1::DTYPE_UINT16);
    by_keys.set_output_dtype(v1::DTYPE_UINT32);
    by_keys.set_op(v1::OPERATOR_SUM);
    by_keys.set_kind(v1::SCAN_KIND_EXCLUSIVE);
    by_keys.set_key_dtype(v1::DTYPE_INT32);

    v1::PipelineHeader h;
    v1::PipelineStage* s = h.add_stages();
    *s->mutable_sort() = so;
    *s->mutable_values() = FromId(kid);
    *s->mutable_sort_values() = FromId(vid);
    s->set_returns(v1::STAGE_RETURN_DATA);
    s = h.add_stages();
    *s->mutable_segmented_scan() = by_heads;
    *s->mutable_values() = FromStage(0, v1::STAGE_ARRAY_SORT_VALUES);
    *s->mutable_flags() = FromId(fid);
    s->set_returns(v1::STAGE_RETURN_DATA);
    s = h.add_stages();
    *s->mutable_segmented_scan() = by_keys;
    *s->mutable_values() = FromStage(0);
    *s->mutable_keys() = FromId(sid);
    s->set_returns(v1::STAGE_RETURN_KEEP);
    const PipelineRun run = RunPipeline(*stub_, h);
    ASSERT_TRUE(run.status.ok()) << run.status.error_message();

    so.mutable_resident()->set_values(kid);
    so.mutable_resident()->set_sort_values(vid);
    so.mutable_resident()->set_keep(true);
    const v1::SortResponse sorted = SortKept(*stub_, so);
    EXPECT_TRUE(run.Data(0) == GetAll(*stub_, sorted.keys_array().id())) << "sorted keys differ";
    EXPECT_TRUE(run.SortValues(0) == GetAll(*stub_, sorted.values_array().id())) << "moved values differ";
    by_heads.mutable_resident()->set_values(sorted.values_array().id());
    by_heads.mutable_resident()->set_flags(fid);
    EXPECT_TRUE(run.Data(1) == SegmentedData(*stub_, by_heads)) << "the float16 segmented scan differs";
    EXPECT_EQ(run.Data(1).size(), n * 2);
    by_keys.mutable_resident()->set_values(sorted.keys_array().id());
    by_keys.mutable_resident()->set_keys(sid);
    const v1::ArrayInfo& made = run.Final(2).scan().array();
    EXPECT_EQ(made.dtype(), v1::DTYPE_UINT32);
    EXPECT_EQ(made.element_count(), n);
    EXPECT_TRUE(GetAll(*stub_, made.id()) == SegmentedData(*stub_, by_keys)) << "the kept segmented scan differs";
  }
}

// A FLOAT16 scan kept in the pipeline is read by the next stage as FLOAT16; naming it as any other
// dtype is refused before anything runs.
TEST_F(PipelineNarrowTest, ALaterStageReadsTheArrayInItsRealDType) {
  const std::string id = PutId(*stub_, v1::DTYPE_INT8, NarrowElements(v1::DTYPE_INT8, 100, 5300));
  v1::PipelineHeader h;
  v1::PipelineStage* s = h.add_stages();
  s->mutable_scan()->set_dtype(v1::DTYPE_INT8);
  s->mutable_scan()->set_op(v1::OPERATOR_SUM);
  *s->mutable_values() = FromId(id);
  s = h.add_stages();
  s->mutable_reduce()->set_dtype(v1::DTYPE_INT8);
  s->mutable_reduce()->set_op(v1::OPERATOR_SUM);
  *s->mutable_values() = FromStage(0);
  const PipelineRun run = RunPipeline(*stub_, h);
  ExpectRefused(run.status, grpc::StatusCode::INVALID_ARGUMENT,
                {"header.stages[1].values", "DTYPE_INT64", "this input must be DTYPE_INT8"});
}

}  // namespace gpuscan::testing::pipeline_narrow
