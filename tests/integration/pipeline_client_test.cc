// gpuscan::Pipeline (the C++ client's builder, gpuscan/pipeline.h) against an in-process server
// with --resident-bytes: chains of stages equal the same Client's calls one by one, bit for bit, on
// random data (never zeros) of every 4- and 8-byte dtype at sizes around the chunk boundaries;
// kept stages come back as RemoteArrays that read back as those results, returned ones as vectors;
// a streamed input (values and flags); misuse refused before any call (std::invalid_argument), and
// what the server refuses surfacing as RpcError with its message, keeping nothing; retries only of
// a pipeline that keeps nothing (against a flaky stand-in for the service).
#include "gpuscan/pipeline.h"

#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "gpuscan/resident_ops.h"
#include "reference.h"  // SameBits
#include "test_server.h"

// A namespace of its own: the unity build puts this file beside others with helpers of these names
// (and types and functions of the client's names: so those are named ::gpuscan::).
namespace gpuscan::testing::pipeline_client_tests {
namespace {

constexpr size_t kChunk = 4096;  // the server's and the client's chunk: arrays cross many

server::ServerOptions ResidentServer() {
  server::ServerOptions o;
  o.chunk_bytes = kChunk;
  o.resident_bytes = uint64_t{64} << 20;
  return o;
}

// Random nonzero elements; floats finite and small so sums stay meaningful.
template <class T>
std::vector<T> Random(size_t n, uint32_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<T> v(n);
  for (T& x : v) {
    if constexpr (std::is_floating_point_v<T>) {
      do x = std::uniform_real_distribution<T>(T(-1.5), T(1.5))(rng);
      while (x == 0);
    } else {
      x = static_cast<T>(rng() % 1000 + 1);
    }
  }
  return v;
}

// Runs of 1-4 equal keys.
template <class K>
std::vector<K> Keys(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<K> k;
  while (k.size() < n) k.insert(k.end(), rng() % 4 + 1, static_cast<K>(rng() % 50 + 1));
  k.resize(n);
  return k;
}

std::vector<uint8_t> Flags(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> f(n);
  for (uint8_t& b : f) b = rng() % 3 == 0 ? static_cast<uint8_t>(rng() % 255 + 1) : 0;
  return f;
}

template <class T>
std::vector<size_t> Sizes() {
  const size_t c = kChunk / sizeof(T);
  return {0, 1, c - 1, c, c + 1, 3 * c + 1};
}

// x > about the middle of Random's values: about half kept.
template <class T>
CompactOptions Above() {
  CompactOptions o;
  o.predicate.set_op(v1::PREDICATE_OP_GT);
  if constexpr (std::is_floating_point_v<T>) {
    o.predicate.mutable_threshold()->set_float_value(0.25);
  } else if constexpr (std::is_signed_v<T>) {
    o.predicate.mutable_threshold()->set_int_value(500);
  } else {
    o.predicate.mutable_threshold()->set_uint_value(500);
  }
  return o;
}

// The server's RpcError of `call`: its code, and a message holding `part`.
template <class Call>
void ExpectRpcError(Call&& call, grpc::StatusCode code, const std::string& part) {
  try {
    call();
    ADD_FAILURE() << "no error (expected " << StatusCodeName(code) << ": ..." << part << "...)";
  } catch (const RpcError& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    EXPECT_NE(e.message().find(part), std::string::npos) << e.message();
  }
}

class PipelineClientTest : public ::testing::Test {
 protected:
  size_t Arrays() { return static_cast<size_t>(client_.ListArrays().arrays_size()); }

  TestServer server_{ResidentServer()};
  Client client_{server_.client_options(kChunk)};
};

template <class T>
class PipelineClientTyped : public PipelineClientTest {};
using ElementTypes = ::testing::Types<int32_t, int64_t, uint32_t, uint64_t, float, double>;
TYPED_TEST_SUITE(PipelineClientTyped, ElementTypes);

// compact (x > t, its values returned) -> exclusive scan (kept) -> reduce (MAX): each stage the same
// bits as the Client's own call on what the stage before made.
TYPED_TEST(PipelineClientTyped, CompactScanReduceEqualsTheCallsOneByOne) {
  using T = TypeParam;
  Client& c = this->client_;
  uint32_t seed = 10;
  for (size_t n : Sizes<T>()) {
    SCOPED_TRACE("n=" + std::to_string(n));
    const std::vector<T> x = Random<T>(n, seed++);
    RemoteArray a = c.Put(x);
    ScanOptions exclusive;
    exclusive.exclusive = true;

    Pipeline p = c.NewPipeline();
    const Stage kept = p.Compact(a, Above<T>(), Return::kData);
    const Stage sums = p.Scan(kept, exclusive, Return::kKeep, {std::chrono::minutes(5), "sums"});
    const Stage max = p.Reduce(sums, v1::OPERATOR_MAX);
    PipelineResult r = p.Run();

    const ::gpuscan::CompactResult<T> one = c.Compact(x, Above<T>());
    const ::gpuscan::ScanResult<T> two = c.Scan(one.values, exclusive);
    EXPECT_TRUE(SameBits(r.Data<T>(kept), one.values));
    EXPECT_EQ(r.Count(kept), one.kept_count);
    EXPECT_EQ(r.Count(sums), one.kept_count);
    RemoteArray s = r.Array(sums);
    ASSERT_TRUE(s);
    EXPECT_EQ(s.dtype(), DTypeOf<T>());
    EXPECT_EQ(s.size(), one.kept_count);
    EXPECT_EQ(s.label(), "sums");
    EXPECT_TRUE(SameBits(s.Get<T>(), two.values));
    if (!two.values.empty()) {
      const ::gpuscan::ReduceResult<T> three = c.Reduce(two.values, v1::OPERATOR_MAX);
      EXPECT_TRUE(SameBits(r.Value<T>(max), three.value));
    }
    EXPECT_EQ(r.Count(max), one.kept_count);
    EXPECT_EQ(r.size(), 3u);
    EXPECT_FALSE(r.Timing(sums).engine.empty());
    EXPECT_FALSE(r.timing().engine.empty());
    EXPECT_GE(r.timing().total_us, r.Timing(max).total_us);
    // The kept array is the caller's now: still there after the result is gone.
    r = PipelineResult();
    EXPECT_TRUE(SameBits(s.Get<T>(), two.values));
  }
}

// The streamed input: scan (returned) -> histogram of the prefix sums; and flags streamed beside a
// resident array, for a compact of values and indices.
TYPED_TEST(PipelineClientTyped, StreamedInputEqualsTheCalls) {
  using T = TypeParam;
  Client& c = this->client_;
  uint32_t seed = 40;
  for (size_t n : Sizes<T>()) {
    SCOPED_TRACE("n=" + std::to_string(n));
    const std::vector<T> x = Random<T>(n, seed++);
    {
      Pipeline p(c);
      const Stage scanned = p.Scan(p.Input(x), {}, Return::kData);
      const Stage hist = p.Histogram(scanned, HistogramBins{16, -50, 50});
      const size_t before = this->Arrays();
      uint64_t sent = 0;
      const PipelineResult r = p.Run([&](uint64_t s, uint64_t) { sent = s; });
      EXPECT_EQ(sent, n * sizeof(T));
      const ::gpuscan::ScanResult<T> one = c.Scan(x);
      EXPECT_TRUE(SameBits(r.Data<T>(scanned), one.values));
      const HistogramResult h = r.Histogram(hist), host = c.Histogram(one.values, HistogramBins{16, -50, 50});
      EXPECT_EQ(h.counts, host.counts);
      EXPECT_EQ(h.below, host.below);
      EXPECT_EQ(h.above, host.above);
      EXPECT_EQ(h.element_count, n);
      EXPECT_EQ(this->Arrays(), before);  // nothing kept, nothing left behind
    }
    {
      const std::vector<uint8_t> flags = Flags(n, seed++);
      RemoteArray a = c.Put(x);
      Pipeline p = c.NewPipeline();
      CompactOptions both;
      both.output = v1::COMPACT_OUTPUT_VALUES_AND_INDICES;
      const Stage kept = p.Compact(a, p.Input(v1::DTYPE_UINT8, flags.data(), flags.size()), both, Return::kData);
      const PipelineResult r = p.Run();
      CompactOptions host = both;
      host.flags = flags;
      host.use_flags = true;  // (flags of n = 0 are empty, which alone would mean "by predicate")
      const ::gpuscan::CompactResult<T> one = c.Compact(x, host);
      EXPECT_TRUE(SameBits(r.Data<T>(kept), one.values));
      EXPECT_TRUE(SameBits(r.Data<int64_t>(kept.Indices()), one.indices));
      EXPECT_EQ(r.Count(kept), one.kept_count);
    }
  }
}

// sort pairs (keys and values kept) -> segmented scan of the moved values by the sorted keys
// (returned); argsort kept: the permutation as an INT64 RemoteArray.
TEST_F(PipelineClientTest, SortThenSegmentedScanEqualsTheCalls) {
  for (size_t n : {size_t{1}, kChunk / 8 - 1, kChunk / 8 + 1, 3 * kChunk / 4 + 1}) {
    SCOPED_TRACE("n=" + std::to_string(n));
    const std::vector<int32_t> k = Keys<int32_t>(n, 7 + static_cast<uint32_t>(n));
    const std::vector<double> v = Random<double>(n, 8 + static_cast<uint32_t>(n));
    RemoteArray keys = client_.Put(k), values = client_.Put(v);
    Pipeline p = client_.NewPipeline();
    const Stage sorted = p.SortPairs(keys, values, false, Return::kKeep);
    const Stage sums = p.SegmentedScan(sorted.SortValues(), sorted, {}, Return::kData);
    const Stage order = p.Argsort(keys, true, Return::kKeep);
    PipelineResult r = p.Run();

    const ::gpuscan::SortResult<int32_t, double> one = client_.SortPairs(k.data(), v.data(), n);
    const ::gpuscan::ScanResult<double> two = client_.SegmentedScan(one.values, one.keys);
    EXPECT_TRUE(SameBits(r.Data<double>(sums), two.values));
    RemoteArray sorted_keys = r.Array(sorted), sorted_values = r.Array(sorted.SortValues());
    EXPECT_TRUE(SameBits(sorted_keys.Get<int32_t>(), one.keys));
    EXPECT_TRUE(SameBits(sorted_values.Get<double>(), one.values));
    const RemoteArray perm = r.Array(order);
    EXPECT_EQ(order.dtype(), v1::DTYPE_INT64);
    EXPECT_TRUE(SameBits(perm.Get<int64_t>(), client_.Argsort(k.data(), n, true).indices));
    EXPECT_THROW(r.Array(order), std::logic_error);  // taken already
  }
}

// Heads streamed in, values resident: a segmented scan by head flags, and the raw call's responses.
// The default, Return::kAuto (Python's fetch=None): a stage's data comes back unless a later stage
// reads it.
TEST_F(PipelineClientTest, ByDefaultAStageNoLaterStageReadsReturnsItsData) {
  const std::vector<int32_t> x = Random<int32_t>(5000, 77);
  RemoteArray a = client_.Put(x);
  Pipeline p = client_.NewPipeline();
  const Stage kept = p.Compact(a, Above<int32_t>());  // read by the scan: an intermediate
  const Stage sums = p.Scan(kept);                     // read by nobody: returned
  const Stage sorted = p.Sort(a);                      // read by the reduce: an intermediate
  const Stage max = p.Reduce(sorted, v1::OPERATOR_MAX);
  const Stage again = p.Sort(a, true);                 // read by nobody: returned
  PipelineResult r = p.Run();
  const ::gpuscan::CompactResult<int32_t> one = client_.Compact(x, Above<int32_t>());
  EXPECT_EQ(r.Data<int32_t>(sums), client_.Scan(one.values).values);
  EXPECT_EQ(r.Value<int32_t>(max), *std::max_element(x.begin(), x.end()));
  EXPECT_EQ(r.Data<int32_t>(again), client_.Sort(x.data(), x.size(), true).keys);
  EXPECT_THROW(r.Data<int32_t>(sorted), std::invalid_argument);
  EXPECT_THROW(r.Data<int32_t>(kept), std::invalid_argument);  // an intermediate: nothing came back
}

TEST_F(PipelineClientTest, SegmentedScanHeadsAndTheRawCall) {
  const size_t n = kChunk + 3;
  const std::vector<int64_t> x = Random<int64_t>(n, 3);
  const std::vector<uint8_t> heads = Flags(n, 4);
  RemoteArray a = client_.Put(x);
  Pipeline p = client_.NewPipeline();
  SegmentedScanOptions o;
  o.op = v1::OPERATOR_MAX;
  const Stage s = p.SegmentedScanHeads(a, p.Input(v1::DTYPE_UINT8, heads.data(), heads.size()), o, Return::kData);
  EXPECT_TRUE(SameBits(p.Run().Data<int64_t>(s), client_.SegmentedScanHeads(x.data(), n, heads.data(), o).values));

  // The same header through the raw call: the stage's responses, then the final one.
  const std::vector<v1::PipelineResponse> raw = client_.PipelineStream(
      p.header(), [&] { return Source(SourceAt::Memory(heads.data(), heads.size())); });
  ASSERT_GE(raw.size(), 2u);
  EXPECT_EQ(raw.back().stage(), 1u);
  EXPECT_TRUE(raw.back().has_timing());
  EXPECT_EQ(raw[raw.size() - 2].scan().element_count(), n);
}

// The server's refusals are RpcErrors with its message (naming the field or stage), and a pipeline
// that fails keeps nothing, its earlier kept stages included.
TEST_F(PipelineClientTest, ServerErrorsSurfaceAsRpcErrorKeepingNothing) {
  const std::vector<int32_t> x = Random<int32_t>(1000, 1);
  RemoteArray a = client_.Put(x), keys = client_.Put(Keys<int32_t>(1000, 2));
  const size_t before = Arrays();
  {  // keys of another length than the values a compact kept: found when the stage runs
    Pipeline p = client_.NewPipeline();
    const Stage kept = p.Compact(a, Above<int32_t>(), Return::kKeep);
    p.Scan(a, {}, Return::kKeep);
    p.SegmentedScan(kept, keys, {}, Return::kData);
    ExpectRpcError([&] { p.Run(); }, grpc::StatusCode::INVALID_ARGUMENT, "header.stages[2].keys");
    EXPECT_EQ(Arrays(), before);
  }
  {  // a narrow scan's result is wide (numpy's UINT64), as the streamed scan's
    const std::vector<uint8_t> bytes = Flags(100, 3);
    RemoteArray narrow = client_.Put(v1::DTYPE_UINT8, bytes.data(), bytes.size());
    Pipeline p = client_.NewPipeline();
    const Stage sums = p.Scan(narrow, {}, Return::kData);
    EXPECT_EQ(sums.dtype(), v1::DTYPE_UINT64);
    const Stage total = p.Reduce(narrow, v1::OPERATOR_SUM);  // its value too: a UINT64
    const PipelineResult r = p.Run();
    const std::vector<uint64_t> got = r.Data<uint64_t>(sums);
    std::vector<uint64_t> want(bytes.size());
    uint64_t sum = 0;
    for (size_t i = 0; i < bytes.size(); ++i) want[i] = sum += bytes[i];
    EXPECT_EQ(got, want);
    EXPECT_EQ(r.Value<uint64_t>(total), sum);
    EXPECT_THROW(r.Value<uint32_t>(total), std::invalid_argument);
    narrow.Drop();
  }
  {  // a dropped array
    RemoteArray gone = client_.Put(x);
    const PipelineInput in = gone;
    gone.Drop();
    Pipeline p = client_.NewPipeline();
    p.Reduce(in, v1::OPERATOR_SUM);
    ExpectRpcError([&] { p.Run(); }, grpc::StatusCode::NOT_FOUND, "header.stages[0].values.id");
  }
  {  // a streamed input no stage reads, and flags of four bytes an element
    Pipeline p = client_.NewPipeline();
    p.Input(x);
    p.Scan(a);
    ExpectRpcError([&] { p.Run(); }, grpc::StatusCode::INVALID_ARGUMENT, "header.input");
    Pipeline q = client_.NewPipeline();
    q.Compact(a, a, {});
    ExpectRpcError([&] { q.Run(); }, grpc::StatusCode::INVALID_ARGUMENT, "header.stages[0].flags");
  }
  {  // no stage at all
    Pipeline p = client_.NewPipeline();
    ExpectRpcError([&] { p.Run(); }, grpc::StatusCode::INVALID_ARGUMENT, "header.stages");
  }
  EXPECT_EQ(Arrays(), before);
}

// What the builder can see is std::invalid_argument before any call.
TEST_F(PipelineClientTest, MisuseIsRefusedBeforeAnyCall) {
  const std::vector<float> x = Random<float>(100, 1);
  RemoteArray a = client_.Put(x), empty;
  Pipeline p = client_.NewPipeline(), other = client_.NewPipeline();
  const Stage theirs = other.Scan(a);
  EXPECT_THROW(p.Scan(theirs), std::invalid_argument);  // a Stage of another Pipeline
  EXPECT_THROW(p.Scan(empty), std::invalid_argument);
  EXPECT_THROW(p.Scan(Stage()), std::invalid_argument);
  TestServer server2(ResidentServer());
  Client elsewhere(server2.client_options(kChunk));
  RemoteArray far = elsewhere.Put(x);
  EXPECT_THROW(p.Scan(far), std::invalid_argument);  // another Client's array
  ScanOptions lanes;
  lanes.lanes = 4;
  EXPECT_THROW(p.Scan(a, lanes), std::invalid_argument);
  CompactOptions host_flags;
  host_flags.flags = {1, 0};
  EXPECT_THROW(p.Compact(a, host_flags), std::invalid_argument);
  CompactOptions use_flags;
  use_flags.use_flags = true;
  EXPECT_THROW(p.Compact(a, use_flags), std::invalid_argument);
  EXPECT_THROW(p.Scan(a, {}, Return::kData, {std::chrono::seconds(5), "x"}), std::invalid_argument);  // keep options
  const Stage m = p.Reduce(a, v1::OPERATOR_SUM);
  EXPECT_THROW(p.Scan(m), std::invalid_argument);  // a reduce makes no array
  CompactOptions indices;
  indices.output = v1::COMPACT_OUTPUT_INDICES;
  const Stage idx = p.Compact(a, indices);
  EXPECT_EQ(idx.array(), v1::STAGE_ARRAY_INDICES);
  EXPECT_THROW(p.Scan(idx.Values()), std::invalid_argument);  // it makes no values
  p.Input(x);
  EXPECT_THROW(p.Input(x), std::invalid_argument);  // one streamed input
  EXPECT_THROW(p.Sort(a, nullptr, v1::SORT_OUTPUT_KEYS_AND_VALUES, false), std::invalid_argument);

  Pipeline q = client_.NewPipeline();
  const Stage s = q.Scan(a, {}, Return::kData);
  const Stage r0 = q.Reduce(s, v1::OPERATOR_SUM);
  PipelineResult r = q.Run();
  EXPECT_THROW(r.Data<double>(s), std::invalid_argument);  // another dtype
  EXPECT_THROW(r.Array(s), std::invalid_argument);         // returned, not kept
  EXPECT_THROW(r.Value<double>(r0), std::invalid_argument);
  EXPECT_THROW(r.Value<float>(s), std::invalid_argument);  // no reduce
  EXPECT_THROW(r.Data<float>(theirs), std::invalid_argument);
  EXPECT_EQ(r.Data<float>(s).size(), x.size());
}

// A stand-in for the service whose Pipeline fails its first calls with UNAVAILABLE once it has read
// the whole request, then answers a pipeline of one SUM Reduce of its int64 streamed input.
class FlakyPipeline final : public v1::GpuScan::Service {
 public:
  std::atomic<int> fails{0}, calls{0};
  std::atomic<uint64_t> last_bytes{0};

  grpc::Status Pipeline(grpc::ServerContext*,
                        grpc::ServerReaderWriter<v1::PipelineResponse, v1::PipelineRequest>* stream) override {
    ++calls;
    v1::PipelineRequest req;
    std::string input;
    while (stream->Read(&req)) input += req.data();
    last_bytes = input.size();
    if (fails > 0) {
      --fails;
      return {grpc::StatusCode::UNAVAILABLE, "flaky: going away"};
    }
    int64_t sum = 0;
    for (size_t i = 0; i + 8 <= input.size(); i += 8) {
      int64_t x;
      std::memcpy(&x, input.data() + i, 8);
      sum += x;
    }
    v1::PipelineResponse stage;
    stage.mutable_reduce()->set_raw_value(&sum, 8);
    stage.mutable_reduce()->set_element_count(input.size() / 8);
    stream->Write(stage);
    v1::PipelineResponse last;
    last.set_stage(1);
    last.mutable_timing()->set_engine("flaky");
    stream->Write(last);
    return grpc::Status::OK;
  }
};

// A pipeline that only reads is retried, its streamed input sent whole again; one that keeps is
// one try (a lost answer may have kept its arrays).
TEST(PipelineClientRetry, OnlyAPipelineThatKeepsNothingIsRetried) {
  FlakyPipeline service;
  int port = 0;
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ClientOptions o;
  o.target = "127.0.0.1:" + std::to_string(port);
  o.chunk_bytes = kChunk;
  o.retry.attempts = 3;
  o.retry.initial_backoff = std::chrono::milliseconds(1);
  Client client(o);
  const std::vector<int64_t> x = Random<int64_t>(3 * kChunk / 8 + 5, 9);
  int64_t sum = 0;
  for (int64_t v : x) sum += v;

  service.fails = 2;
  Pipeline p = client.NewPipeline();
  const Stage total = p.Reduce(p.Input(x), v1::OPERATOR_SUM);
  EXPECT_EQ(p.Run().Value<int64_t>(total), sum);
  EXPECT_EQ(service.calls, 3);
  EXPECT_EQ(service.last_bytes, x.size() * 8);

  service.calls = 0;
  service.fails = 1;
  Pipeline q = client.NewPipeline();
  q.Scan(q.Input(x), {}, Return::kKeep);
  ExpectRpcError([&] { q.Run(); }, grpc::StatusCode::UNAVAILABLE, "flaky: going away");
  EXPECT_EQ(service.calls, 1);
  server->Shutdown();
}

}  // namespace
}  // namespace gpuscan::testing::pipeline_client_tests
