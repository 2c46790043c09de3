// Pipeline through the raw stub against an in-process server: chains of stages on resident arrays
// and on a streamed input equal the operations called one by one (bit for bit: floats with NaN and
// -0), on random data and sizes around the server's chunk; kept arrays are registered, returned
// ones stream back, intermediates leave nothing behind; a stage failing at run time keeps nothing.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "pipeline_fixture.h"

// A namespace of its own: the unity build puts this file beside others with helpers of these names.
namespace gpuscan::testing::pipeline_tests {
namespace {

using namespace resident;  // NOLINT: the fixture's helpers

bool IsFloat(v1::DType d) { return d == v1::DTYPE_FLOAT32 || d == v1::DTYPE_FLOAT64; }

// Random values with, for floats, NaN and -0 every few elements.
std::string Values(v1::DType dtype, uint64_t n, uint32_t seed) {
  std::string s = RandomArray(dtype, n, seed);
  for (uint64_t i = 2; IsFloat(dtype) && i < n; i += 7) {
    const double v = i % 2 ? std::nan("") : -0.0;
    if (dtype == v1::DTYPE_FLOAT32) {
      const float f = static_cast<float>(v);
      std::memcpy(&s[i * 4], &f, 4);
    } else {
      std::memcpy(&s[i * 8], &v, 8);
    }
  }
  return s;
}

// x > 0 on the host (NaN and -0 are not), the elements kept in order: what Compact keeps.
template <class T>
std::string KeepPositive(const std::string& data) {
  std::string out;
  for (size_t i = 0; i < data.size() / sizeof(T); ++i) {
    T x;
    std::memcpy(&x, &data[i * sizeof(T)], sizeof(T));
    if (x > T(0)) out.append(reinterpret_cast<const char*>(&x), sizeof(T));
  }
  return out;
}
std::string KeepPositive(v1::DType dtype, const std::string& data) {
  switch (dtype) {
    case v1::DTYPE_INT32: return KeepPositive<int32_t>(data);
    case v1::DTYPE_INT64: return KeepPositive<int64_t>(data);
    case v1::DTYPE_UINT32: return KeepPositive<uint32_t>(data);
    case v1::DTYPE_UINT64: return KeepPositive<uint64_t>(data);
    case v1::DTYPE_FLOAT32: return KeepPositive<float>(data);
    default: return KeepPositive<double>(data);
  }
}

v1::CompactHeader Positive(v1::DType dtype) {
  v1::CompactHeader h;
  h.set_dtype(dtype);
  v1::Predicate* p = h.mutable_predicate();
  p->set_op(v1::PREDICATE_OP_GT);
  if (IsFloat(dtype)) {
    p->mutable_threshold()->set_float_value(0.0);
  } else if (dtype == v1::DTYPE_UINT32 || dtype == v1::DTYPE_UINT64) {
    p->mutable_threshold()->set_uint_value(0);
  } else {
    p->mutable_threshold()->set_int_value(0);
  }
  return h;
}

// Around the server's chunk (kChunk bytes), and a few chunks.
std::vector<uint64_t> Sizes(v1::DType dtype) {
  const uint64_t per = kChunk / SizeOf(dtype);
  return {0, 1, per - 1, per + 1, 3 * per + 5};
}

const v1::DType kDTypes[] = {v1::DTYPE_INT32,  v1::DTYPE_INT64,   v1::DTYPE_UINT32,
                             v1::DTYPE_UINT64, v1::DTYPE_FLOAT32, v1::DTYPE_FLOAT64};

class PipelineTest : public ::testing::Test {
 protected:
  v1::ListArraysResponse List(const std::string& tenant = "") {
    grpc::ClientContext ctx;
    Tenant(&ctx, tenant);
    v1::ListArraysResponse r;
    EXPECT_TRUE(stub_->ListArrays(&ctx, {}, &r).ok());
    return r;
  }

  TestServer server_{ResidentOptions()};
  std::unique_ptr<v1::GpuScan::Stub> stub_ = server_.stub();
};

// compact(x > 0) -> scan (exclusive SUM, returned) -> reduce (MAX): each stage equals the streamed
// call on what the stage before made, for every dtype and sizes around the chunk.
TEST_F(PipelineTest, CompactScanReduceEqualsTheCallsOneByOne) {
  uint32_t seed = 900;
  for (v1::DType dtype : kDTypes) {
    for (uint64_t n : Sizes(dtype)) {
      SCOPED_TRACE(v1::DType_Name(dtype) + " n=" + std::to_string(n));
      const std::string data = Values(dtype, n, seed++);
      const std::string id = PutId(*stub_, dtype, data);
      v1::PipelineHeader h;
      v1::PipelineStage* compact = h.add_stages();
      *compact->mutable_compact() = Positive(dtype);
      *compact->mutable_values() = FromId(id);
      v1::PipelineStage* scan = h.add_stages();
      scan->mutable_scan()->set_dtype(dtype);
      scan->mutable_scan()->set_op(v1::OPERATOR_SUM);
      scan->mutable_scan()->set_kind(v1::SCAN_KIND_EXCLUSIVE);
      *scan->mutable_values() = FromStage(0);
      scan->set_returns(v1::STAGE_RETURN_DATA);
      v1::PipelineStage* reduce = h.add_stages();
      reduce->mutable_reduce()->set_dtype(dtype);
      reduce->mutable_reduce()->set_op(v1::OPERATOR_MAX);
      *reduce->mutable_values() = FromStage(1);
      const PipelineRun run = RunPipeline(*stub_, h);
      ASSERT_TRUE(run.status.ok()) << run.status.error_message();

      const std::string kept = KeepPositive(dtype, data);
      EXPECT_EQ(run.Final(0).compact().kept_count(), kept.size() / SizeOf(dtype));
      std::string scanned, max;
      v1::ScanHeader sh = scan->scan();
      ASSERT_TRUE(Scan(*stub_, sh, &kept, &scanned).ok());
      EXPECT_TRUE(run.Data(1) == scanned) << "the scan stage differs from the streamed scan";
      ASSERT_TRUE(Reduce(*stub_, reduce->reduce(), &scanned, &max).ok());
      EXPECT_EQ(run.Final(2).reduce().raw_value(), max);
      EXPECT_EQ(run.Final(3).stage(), 3u);
      EXPECT_TRUE(run.Final(3).has_timing());
      EXPECT_EQ(run.Final(1).scan().element_count(), kept.size() / SizeOf(dtype));
      EXPECT_FALSE(run.Final(1).scan().timing().engine().empty());
    }
  }
  EXPECT_EQ(List().arrays_size(), static_cast<int>(std::size(kDTypes) * Sizes(v1::DTYPE_INT32).size()))
      << "only the arrays put are left";
}

// sort (keys and values) -> segmented scan of the moved values by the sorted keys: a group-by's
// running sums, equal to the streamed segmented scan of the host-sorted arrays (float64 SUM goes
// through the session's streamed path on the cuda engine: the bits are that path's).
TEST_F(PipelineTest, SortThenSegmentedScanByTheSortedKeys) {
  for (v1::DType vdtype : {v1::DTYPE_INT64, v1::DTYPE_FLOAT64}) {
    for (uint64_t n : {uint64_t{0}, uint64_t{1}, uint64_t{700}, uint64_t{2500}}) {
      SCOPED_TRACE(v1::DType_Name(vdtype) + " n=" + std::to_string(n));
      std::vector<int32_t> keys(n);
      std::mt19937 rng(static_cast<uint32_t>(n) + 17);
      for (int32_t& k : keys) k = static_cast<int32_t>(rng() % 13) - 6;
      const std::string kbytes(reinterpret_cast<const char*>(keys.data()), n * 4);
      const std::string values = Values(vdtype, n, static_cast<uint32_t>(n) + 5);
      const std::string kid = PutId(*stub_, v1::DTYPE_INT32, kbytes), vid = PutId(*stub_, vdtype, values);
      v1::PipelineHeader h;
      v1::PipelineStage* sort = h.add_stages();
      sort->mutable_sort()->set_dtype(v1::DTYPE_INT32);
      sort->mutable_sort()->set_output(v1::SORT_OUTPUT_KEYS_AND_VALUES);
      sort->mutable_sort()->set_values_dtype(vdtype);
      *sort->mutable_values() = FromId(kid);
      *sort->mutable_sort_values() = FromId(vid);
      v1::PipelineStage* seg = h.add_stages();
      seg->mutable_segmented_scan()->set_dtype(vdtype);
      seg->mutable_segmented_scan()->set_op(v1::OPERATOR_SUM);
      seg->mutable_segmented_scan()->set_key_dtype(v1::DTYPE_INT32);
      *seg->mutable_values() = FromStage(0, v1::STAGE_ARRAY_SORT_VALUES);
      *seg->mutable_keys() = FromStage(0, v1::STAGE_ARRAY_VALUES);
      seg->set_returns(v1::STAGE_RETURN_DATA);
      const PipelineRun run = RunPipeline(*stub_, h);
      ASSERT_TRUE(run.status.ok()) << run.status.error_message();

      // The stable sort on the host, then the streamed segmented scan of what it gives.
      std::vector<size_t> order(n);
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return keys[a] < keys[b]; });
      std::string sorted_keys, sorted_values;
      for (size_t i : order) {
        sorted_keys.append(kbytes, i * 4, 4);
        sorted_values.append(values, i * 8, 8);
      }
      grpc::ClientContext ctx;
      auto stream = stub_->SegmentedScan(&ctx);
      v1::SegmentedScanRequest req;
      *req.mutable_header() = seg->segmented_scan();
      stream->Write(req);
      for (size_t first = 0; first < n; first += 300) {
        v1::SegmentedScanRequest chunk;
        chunk.set_data(sorted_values.substr(first * 8, 300 * 8));
        chunk.set_keys(sorted_keys.substr(first * 4, 300 * 4));
        stream->Write(chunk);
      }
      std::string expected;
      ASSERT_TRUE(FinishScanStream(*stream, &expected, nullptr).ok());
      EXPECT_TRUE(run.Data(1) == expected) << "the segmented scan stage differs from the streamed call";
      EXPECT_EQ(run.Final(0).sort().element_count(), n);
    }
  }
}

// A streamed input, scanned, and the histogram of the scan: the wire is paid once for the chain.
TEST_F(PipelineTest, HistogramOfTheScanOfAStreamedInput) {
  for (uint64_t n : {uint64_t{1}, uint64_t{1023}, uint64_t{1025}, uint64_t{5000}}) {
    SCOPED_TRACE("n=" + std::to_string(n));
    std::vector<int32_t> x(n);
    std::mt19937 rng(static_cast<uint32_t>(n));
    for (int32_t& v : x) v = static_cast<int32_t>(rng() % 201) - 100;
    const std::string bytes(reinterpret_cast<const char*>(x.data()), n * 4);
    for (bool declare : {true, false}) {
      v1::PipelineHeader h;
      h.mutable_input()->set_dtype(v1::DTYPE_INT32);
      if (declare) h.mutable_input()->set_element_count(n);
      v1::PipelineStage* scan = h.add_stages();
      scan->mutable_scan()->set_dtype(v1::DTYPE_INT32);
      scan->mutable_scan()->set_op(v1::OPERATOR_SUM);
      *scan->mutable_values() = FromStream();
      v1::PipelineStage* hist = h.add_stages();
      hist->mutable_histogram()->set_dtype(v1::DTYPE_INT32);
      hist->mutable_histogram()->set_bins(16);
      hist->mutable_histogram()->set_lo(-4000);
      hist->mutable_histogram()->set_hi(4000);
      *hist->mutable_values() = FromStage(0);
      const PipelineRun run = RunPipeline(*stub_, h, bytes);
      ASSERT_TRUE(run.status.ok()) << run.status.error_message();
      std::vector<uint64_t> counts(16);
      uint64_t below = 0, above = 0;
      int64_t sum = 0;
      for (int32_t v : x) {
        sum += v;
        if (sum < -4000) {
          ++below;
        } else if (sum > 4000) {
          ++above;
        } else {
          counts[std::min<int64_t>(15, (sum + 4000) / 500)]++;
        }
      }
      const v1::HistogramResponse& got = run.Final(1).histogram();
      ASSERT_EQ(got.counts().size(), 16u * 8);
      std::vector<uint64_t> have(16);
      std::memcpy(have.data(), got.counts().data(), 16 * 8);
      EXPECT_EQ(have, counts);
      EXPECT_EQ(got.below(), below);
      EXPECT_EQ(got.above(), above);
      EXPECT_EQ(run.Final(2).timing().bytes_in(), n * 4);
    }
  }
  EXPECT_EQ(List().arrays_size(), 0) << "the streamed input and the scan were not kept";
  EXPECT_EQ(List().used_bytes(), 0u);
}

// Kept stages: registered with their ArrayInfo (a compaction's cut to what it kept), their data
// what the stage made; the intermediates leave nothing, and another tenant sees none of them.
TEST_F(PipelineTest, KeptStagesAreArraysOfTheTenant) {
  const uint64_t n = 3000;
  const std::string data = Values(v1::DTYPE_FLOAT32, n, 77);
  const std::string id = PutId(*stub_, v1::DTYPE_FLOAT32, data, "a");
  v1::PipelineHeader h;
  v1::PipelineStage* compact = h.add_stages();
  *compact->mutable_compact() = Positive(v1::DTYPE_FLOAT32);
  compact->mutable_compact()->set_output(v1::COMPACT_OUTPUT_VALUES_AND_INDICES);
  *compact->mutable_values() = FromId(id);
  compact->set_returns(v1::STAGE_RETURN_KEEP);
  compact->set_label("kept");
  v1::PipelineStage* sort = h.add_stages();
  sort->mutable_sort()->set_dtype(v1::DTYPE_FLOAT32);
  sort->mutable_sort()->set_descending(true);
  sort->mutable_sort()->set_output(v1::SORT_OUTPUT_INDICES);
  *sort->mutable_values() = FromStage(0);
  sort->set_returns(v1::STAGE_RETURN_KEEP);
  const uint64_t before = List("a").used_bytes();
  const PipelineRun run = RunPipeline(*stub_, h, "", "a");
  ASSERT_TRUE(run.status.ok()) << run.status.error_message();

  const std::string kept = KeepPositive(v1::DTYPE_FLOAT32, data);
  const v1::CompactResponse& c = run.Final(0).compact();
  ASSERT_EQ(c.values_array().element_count(), kept.size() / 4);
  EXPECT_EQ(c.values_array().label(), "kept");
  EXPECT_EQ(c.values_array().bytes(), kept.size());
  std::string got;
  ASSERT_TRUE(Get(*stub_, c.values_array().id(), &got, "a").ok());
  EXPECT_TRUE(got == kept);
  ASSERT_TRUE(Get(*stub_, c.indices_array().id(), &got, "a").ok());
  ASSERT_EQ(got.size(), kept.size() / 4 * 8);
  for (size_t i = 0, k = 0; i < n; ++i) {  // the indices point at the kept values, in order
    float x;
    std::memcpy(&x, &data[i * 4], 4);
    if (!(x > 0)) continue;
    int64_t at;
    std::memcpy(&at, &got[k++ * 8], 8);
    ASSERT_EQ(at, static_cast<int64_t>(i));
  }
  const v1::ArrayInfo& order = run.Final(1).sort().indices_array();
  ASSERT_TRUE(Get(*stub_, order.id(), &got, "a").ok());
  std::vector<int64_t> perm(kept.size() / 4);
  std::memcpy(perm.data(), got.data(), got.size());
  for (size_t i = 1; i < perm.size(); ++i) {
    float a, b;
    std::memcpy(&a, &kept[perm[i - 1] * 4], 4);
    std::memcpy(&b, &kept[perm[i] * 4], 4);
    ASSERT_GE(a, b) << "descending at " << i;
  }
  const v1::ListArraysResponse list = List("a");
  EXPECT_EQ(list.arrays_size(), 4);  // the input and the three kept
  EXPECT_EQ(list.used_bytes(), before + kept.size() + kept.size() / 4 * 16) << "no intermediate left";
  std::string other;
  EXPECT_EQ(Get(*stub_, order.id(), &other, "b").error_code(), grpc::StatusCode::NOT_FOUND);
}

// A stage that fails when it runs (keys of another length than the kept values) fails the call
// naming the stage, and keeps nothing, the stages before included.
TEST_F(PipelineTest, AStageFailingAtRunTimeKeepsNothing) {
  const std::string data = Values(v1::DTYPE_INT32, 2000, 5);
  const std::string id = PutId(*stub_, v1::DTYPE_INT32, data);
  const std::string keys = PutId(*stub_, v1::DTYPE_INT32, RandomArray(v1::DTYPE_INT32, 2000, 6));
  v1::PipelineHeader h;
  v1::PipelineStage* compact = h.add_stages();
  *compact->mutable_compact() = Positive(v1::DTYPE_INT32);
  *compact->mutable_values() = FromId(id);
  compact->set_returns(v1::STAGE_RETURN_KEEP);
  v1::PipelineStage* seg = h.add_stages();
  seg->mutable_segmented_scan()->set_dtype(v1::DTYPE_INT32);
  seg->mutable_segmented_scan()->set_op(v1::OPERATOR_SUM);
  seg->mutable_segmented_scan()->set_key_dtype(v1::DTYPE_INT32);
  *seg->mutable_values() = FromStage(0);
  *seg->mutable_keys() = FromId(keys);
  const uint64_t before = List().used_bytes();
  const PipelineRun run = RunPipeline(*stub_, h);
  ExpectRefused(run.status, grpc::StatusCode::INVALID_ARGUMENT, {"header.stages[1].keys", "2000 elements"});
  EXPECT_TRUE(run.responses.empty()) << "nothing is sent before every stage ran";
  EXPECT_EQ(List().arrays_size(), 2);
  EXPECT_EQ(List().used_bytes(), before);
}

// What the plan refuses before anything runs: each names its field.
TEST_F(PipelineTest, RefusalsNameTheField) {
  const std::string id = PutId(*stub_, v1::DTYPE_INT32, RandomArray(v1::DTYPE_INT32, 100, 1));
  auto scan_of = [](const v1::StageInput& in) {
    v1::PipelineStage s;
    s.mutable_scan()->set_dtype(v1::DTYPE_INT32);
    s.mutable_scan()->set_op(v1::OPERATOR_SUM);
    *s.mutable_values() = in;
    return s;
  };
  struct Case {
    std::string name;
    v1::PipelineHeader header;
    grpc::StatusCode code;
    std::vector<std::string> parts;
  };
  std::vector<Case> cases;
  auto add = [&](const std::string& name, grpc::StatusCode code, std::vector<std::string> parts) -> v1::PipelineHeader& {
    cases.push_back({name, {}, code, std::move(parts)});
    return cases.back().header;
  };
  add("empty", grpc::StatusCode::INVALID_ARGUMENT, {"header.stages", "at least one"});
  {
    auto& h = add("forward", grpc::StatusCode::INVALID_ARGUMENT, {"header.stages[0].values.stage", "not an earlier"});
    *h.add_stages() = scan_of(FromStage(1));
    *h.add_stages() = scan_of(FromId(id));
  }
  {
    auto& h = add("itself", grpc::StatusCode::INVALID_ARGUMENT, {"header.stages[1].values.stage", "1"});
    *h.add_stages() = scan_of(FromId(id));
    *h.add_stages() = scan_of(FromStage(1));
  }
  {
    auto& h = add("no such array", grpc::StatusCode::INVALID_ARGUMENT,
                  {"header.stages[1].values", "makes no STAGE_ARRAY_INDICES"});
    *h.add_stages() = scan_of(FromId(id));
    *h.add_stages() = scan_of(FromStage(0, v1::STAGE_ARRAY_INDICES));
  }
  {
    auto& h = add("reduce makes none", grpc::StatusCode::INVALID_ARGUMENT, {"header.stages[1].values", "reduce"});
    v1::PipelineStage* r = h.add_stages();
    r->mutable_reduce()->set_dtype(v1::DTYPE_INT32);
    r->mutable_reduce()->set_op(v1::OPERATOR_SUM);
    *r->mutable_values() = FromId(id);
    *h.add_stages() = scan_of(FromStage(0));
  }
  {
    auto& h = add("wrong dtype", grpc::StatusCode::INVALID_ARGUMENT, {"header.stages[1].values", "DTYPE_INT64"});
    v1::PipelineStage* c = h.add_stages();
    *c->mutable_compact() = Positive(v1::DTYPE_INT32);
    c->mutable_compact()->set_output(v1::COMPACT_OUTPUT_INDICES);
    *c->mutable_values() = FromId(id);
    *h.add_stages() = scan_of(FromStage(0, v1::STAGE_ARRAY_INDICES));
  }
  {
    auto& h = add("resident dtype", grpc::StatusCode::INVALID_ARGUMENT, {"header.stages[0].values.id", "DTYPE_INT64"});
    v1::PipelineStage s = scan_of(FromId(id));
    s.mutable_scan()->set_dtype(v1::DTYPE_INT64);
    *h.add_stages() = s;
  }
  {
    auto& h = add("returns of reduce", grpc::StatusCode::INVALID_ARGUMENT, {"header.stages[0].returns"});
    v1::PipelineStage* r = h.add_stages();
    r->mutable_reduce()->set_dtype(v1::DTYPE_INT32);
    r->mutable_reduce()->set_op(v1::OPERATOR_SUM);
    *r->mutable_values() = FromId(id);
    r->set_returns(v1::STAGE_RETURN_KEEP);
  }
  {
    auto& h = add("placement", grpc::StatusCode::INVALID_ARGUMENT, {"header.stages[0].scan.resident"});
    v1::PipelineStage s = scan_of(FromId(id));
    s.mutable_scan()->mutable_resident()->set_values(id);
    *h.add_stages() = s;
  }
  {
    auto& h = add("narrow stage of a wide array", grpc::StatusCode::INVALID_ARGUMENT,
                  {"header.stages[0].values.id", "is DTYPE_INT32; this input must be DTYPE_INT8"});
    v1::PipelineStage s = scan_of(FromId(id));
    s.mutable_scan()->set_dtype(v1::DTYPE_INT8);
    *h.add_stages() = s;
  }
  {
    auto& h = add("streamed without input", grpc::StatusCode::INVALID_ARGUMENT,
                  {"header.stages[0].values.streamed", "header.input"});
    *h.add_stages() = scan_of(FromStream());
  }
  {
    auto& h = add("input unread", grpc::StatusCode::INVALID_ARGUMENT, {"header.input", "no stage reads it"});
    h.mutable_input()->set_dtype(v1::DTYPE_INT32);
    *h.add_stages() = scan_of(FromId(id));
  }
  {
    auto& h = add("missing values", grpc::StatusCode::INVALID_ARGUMENT, {"header.stages[0].values", "required"});
    *h.add_stages() = scan_of(v1::StageInput());
    h.mutable_stages(0)->clear_values();
  }
  {
    auto& h = add("input it does not take", grpc::StatusCode::INVALID_ARGUMENT,
                  {"header.stages[0].keys", "takes no such input"});
    v1::PipelineStage s = scan_of(FromId(id));
    *s.mutable_keys() = FromId(id);
    *h.add_stages() = s;
  }
  {
    auto& h = add("too many", grpc::StatusCode::INVALID_ARGUMENT, {"header.stages", "Limits.max_pipeline_stages"});
    for (int i = 0; i < 65; ++i) *h.add_stages() = scan_of(FromId(id));
  }
  {
    auto& h = add("unknown id", grpc::StatusCode::NOT_FOUND, {"header.stages[0].values.id"});
    std::string other = id;
    other[0] = static_cast<char>(other[0] ^ 1);
    *h.add_stages() = scan_of(FromId(other));
  }
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    ExpectRefused(RunPipeline(*stub_, c.header).status, c.code, c.parts);
  }
  // Another tenant's id is not found, exactly as an unknown one.
  v1::PipelineHeader h;
  *h.add_stages() = scan_of(FromId(id));
  ExpectRefused(RunPipeline(*stub_, h, "", "other").status, grpc::StatusCode::NOT_FOUND, {"header.stages[0].values.id"});
  // Data without a streamed input.
  grpc::ClientContext ctx;
  auto stream = stub_->Pipeline(&ctx);
  v1::PipelineRequest req;
  *req.mutable_header() = h;
  req.set_data("abcd");
  stream->Write(req);
  stream->WritesDone();
  v1::PipelineResponse resp;
  while (stream->Read(&resp)) {
  }
  ExpectRefused(stream->Finish(), grpc::StatusCode::INVALID_ARGUMENT, {"request #0", "header.input"});
}

// A server that keeps no arrays answers UNIMPLEMENTED naming the flag.
TEST(PipelineServed, NotWithoutResidentBytes) {
  TestServer server;
  auto stub = server.stub();
  v1::PipelineHeader h;
  v1::PipelineStage* s = h.add_stages();
  s->mutable_scan()->set_dtype(v1::DTYPE_INT32);
  s->mutable_values()->set_streamed(true);
  h.mutable_input()->set_dtype(v1::DTYPE_INT32);
  ExpectRefused(RunPipeline(*stub, h, std::string(400, 'x')).status, grpc::StatusCode::UNIMPLEMENTED,
                {"--resident-bytes"});
}

}  // namespace
}  // namespace gpuscan::testing::pipeline_tests
