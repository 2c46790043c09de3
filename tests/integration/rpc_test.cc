// Every RPC driven by gpuscan::Client against an in-process server: multi-chunk arrays of
// every dtype, results checked against the sequential reference, Timing filled in.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <memory>
#include <random>
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "canonical_reference.h"
#include "engine/engine.h"
#include "gpuscan/kernels/histogram_bins.h"
#include "reference.h"
#include "test_server.h"

namespace gpuscan {
namespace {

using testing::TestServer;

class RpcTest : public ::testing::Test {
 public:
  // Small chunks so modest arrays span many messages.
  static constexpr size_t kChunkBytes = 64 * 1024;

 protected:
  static void SetUpTestSuite() { server_ = new TestServer(); }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  Client client_{server_->client_options(kChunkBytes)};
  static TestServer* server_;
};
TestServer* RpcTest::server_ = nullptr;

template <class T>
class TypedRpcTest : public RpcTest {};
using AllTypes = ::testing::Types<int32_t, int64_t, uint32_t, uint64_t, float, double>;
TYPED_TEST_SUITE(TypedRpcTest, AllTypes);

// A size that spans several chunks and ends mid-chunk.
template <class T>
size_t MultiChunkSize() {
  return 3 * RpcTest::kChunkBytes / sizeof(T) + 17;
}

template <class T, template <class> class Op>
void CheckScan(Client& client, size_t n, v1::Operator wire_op, bool exclusive) {
  GPUSCAN_SEEDED_RNG(rng);
  const std::vector<T> x = testing::RandomInput<T, Op<T>>(n, rng);
  ScanOptions opts;
  opts.op = wire_op;
  opts.exclusive = exclusive;
  const ScanResult<T> r = client.Scan(x, opts);
  const std::vector<T> ref = testing::ScanRef<T, Op<T>>(x, exclusive);
  testing::ExpectScanNear<T, Op<T>>(r.values, ref, x, exclusive,
                                    std::string("scan ") + v1::Operator_Name(wire_op) +
                                        (exclusive ? " exclusive" : " inclusive"));
  EXPECT_EQ(r.timing.bytes_in, n * sizeof(T));
  EXPECT_EQ(r.timing.bytes_out, n * sizeof(T));
  EXPECT_FALSE(r.timing.engine.empty());
  EXPECT_FALSE(r.timing.algorithm.empty());
  EXPECT_GE(r.timing.total_us, r.timing.kernel_us);
}

TYPED_TEST(TypedRpcTest, ScanEveryOperatorMultiChunk) {
  using T = TypeParam;
  const size_t n = MultiChunkSize<T>();
  for (bool exclusive : {false, true}) {
    CheckScan<T, ops::Sum>(this->client_, n, v1::OPERATOR_SUM, exclusive);
    CheckScan<T, ops::Product>(this->client_, n, v1::OPERATOR_PRODUCT, exclusive);
    CheckScan<T, ops::Min>(this->client_, n, v1::OPERATOR_MIN, exclusive);
    CheckScan<T, ops::Max>(this->client_, n, v1::OPERATOR_MAX, exclusive);
    if constexpr (std::is_integral_v<T>) {
      CheckScan<T, ops::BitAnd>(this->client_, n, v1::OPERATOR_BIT_AND, exclusive);
      CheckScan<T, ops::BitOr>(this->client_, n, v1::OPERATOR_BIT_OR, exclusive);
      CheckScan<T, ops::BitXor>(this->client_, n, v1::OPERATOR_BIT_XOR, exclusive);
    }
  }
}

TYPED_TEST(TypedRpcTest, ScanSmallSizes) {
  using T = TypeParam;
  for (size_t n : {0, 1, 2, 31, 32, 33, 1023, 1024, 1025}) {
    SCOPED_TRACE(n);
    CheckScan<T, ops::Sum>(this->client_, n, v1::OPERATOR_SUM, n % 2 == 0);
  }
}

template <class T, template <class> class Op>
void CheckReduce(Client& client, size_t n, v1::Operator wire_op) {
  GPUSCAN_SEEDED_RNG(rng);
  const std::vector<T> x = testing::RandomInput<T, Op<T>>(n, rng);
  const ReduceResult<T> r = client.Reduce(x, wire_op);
  const std::vector<T> ref = testing::ScanRef<T, Op<T>>(x, false);
  const std::vector<T> got = {r.value};
  const std::vector<T> want = {n ? ref.back() : Op<T>::identity()};
  double abs_sum = 0;
  for (T v : x) abs_sum += std::fabs(double(v));
  EXPECT_TRUE((testing::WithinTolerance<T, Op<T>>(r.value, want[0], abs_sum, double(n))))
      << v1::Operator_Name(wire_op) << ": got " << testing::Show(r.value) << ", expected "
      << testing::Show(want[0]);
  EXPECT_EQ(r.element_count, n);
  EXPECT_EQ(r.timing.bytes_in, n * sizeof(T));
}

TYPED_TEST(TypedRpcTest, ReduceEveryOperator) {
  using T = TypeParam;
  for (size_t n : {size_t{0}, size_t{1}, MultiChunkSize<T>()}) {
    SCOPED_TRACE(n);
    CheckReduce<T, ops::Sum>(this->client_, n, v1::OPERATOR_SUM);
    CheckReduce<T, ops::Product>(this->client_, n, v1::OPERATOR_PRODUCT);
    CheckReduce<T, ops::Min>(this->client_, n, v1::OPERATOR_MIN);
    CheckReduce<T, ops::Max>(this->client_, n, v1::OPERATOR_MAX);
    if constexpr (std::is_integral_v<T>) {
      CheckReduce<T, ops::BitAnd>(this->client_, n, v1::OPERATOR_BIT_AND);
      CheckReduce<T, ops::BitOr>(this->client_, n, v1::OPERATOR_BIT_OR);
      CheckReduce<T, ops::BitXor>(this->client_, n, v1::OPERATOR_BIT_XOR);
    }
  }
}

TYPED_TEST(TypedRpcTest, CompactWithFlagsValuesAndIndices) {
  using T = TypeParam;
  GPUSCAN_SEEDED_RNG(rng);
  const size_t n = MultiChunkSize<T>();
  const std::vector<T> x = testing::RandomCompactInput<T>(n, rng);
  CompactOptions o;
  o.use_flags = true;
  o.flags = testing::RandomFlags(n, rng, 0.5);
  o.output = v1::COMPACT_OUTPUT_VALUES_AND_INDICES;
  const CompactResult<T> r = this->client_.Compact(x, o);
  const auto ref = testing::CompactRef(x, o.flags);
  testing::ExpectEqualValues(r.values, ref.values, "kept values");
  EXPECT_EQ(r.indices, ref.indices);
  EXPECT_EQ(r.kept_count, ref.values.size());
  EXPECT_EQ(r.timing.bytes_in, n * sizeof(T) + n);
}

TYPED_TEST(TypedRpcTest, CompactWithPredicateIndicesOnly) {
  using T = TypeParam;
  GPUSCAN_SEEDED_RNG(rng);
  const size_t n = MultiChunkSize<T>();
  const std::vector<T> x = testing::RandomCompactInput<T>(n, rng);
  const T threshold = x[n / 2];
  CompactOptions o;
  o.predicate.set_op(v1::PREDICATE_OP_GT);
  if constexpr (std::is_floating_point_v<T>) {
    o.predicate.mutable_threshold()->set_float_value(threshold);
  } else if constexpr (std::is_signed_v<T>) {
    o.predicate.mutable_threshold()->set_int_value(threshold);
  } else {
    o.predicate.mutable_threshold()->set_uint_value(threshold);
  }
  o.output = v1::COMPACT_OUTPUT_INDICES;
  const CompactResult<T> r = this->client_.Compact(x, o);
  const auto ref = testing::CompactRef(x, engine::PredicateOp::kGt, threshold);
  EXPECT_TRUE(r.values.empty());
  EXPECT_EQ(r.indices, ref.indices);
  EXPECT_EQ(r.kept_count, ref.indices.size());
}

// Segmented scans over the wire: keys of each key dtype and head flags, segments spanning the
// client's chunks; float SUM/PRODUCT bit for bit the canonical tree over pairs.
template <class T, template <class> class Op, class K>
void CheckSegmented(Client& client, size_t n, v1::Operator wire_op, bool exclusive, bool heads) {
  GPUSCAN_SEEDED_RNG(rng);
  const std::vector<T> x = testing::RandomInput<T, Op<T>>(n, rng);
  const std::vector<K> keys = testing::RandomSegmentKeys<K>(n, rng, 700);
  const std::vector<uint8_t> h = testing::HeadsOfKeys(keys);
  SegmentedScanOptions o;
  o.op = wire_op;
  o.exclusive = exclusive;
  const ScanResult<T> r = heads ? client.SegmentedScanHeads(x.data(), n, h.data(), o) : client.SegmentedScan(x, keys, o);
  const std::string what = std::string("segmented ") + v1::Operator_Name(wire_op) +
                           (exclusive ? " exclusive" : " inclusive") + (heads ? ", heads" : ", keys");
  if constexpr (testing::kRounds<T, Op<T>>) {
    const std::vector<T> tree = testing::SegmentedCanonicalRef<T, Op<T>>(x, h, exclusive);
    ASSERT_EQ(r.values.size(), n) << what;
    EXPECT_TRUE(testing::SameBytes(r.values.data(), tree.data(), n * sizeof(T))) << what << ": not the canonical bits";
  } else {
    testing::ExpectEqualValues(r.values, testing::SegmentedScanRef<T, Op<T>>(x, h, exclusive), what);
  }
  EXPECT_EQ(r.timing.bytes_in, n * (sizeof(T) + (heads ? 1 : sizeof(K)))) << what;
  EXPECT_EQ(r.timing.bytes_out, n * sizeof(T)) << what;
  EXPECT_NE(r.timing.algorithm.find("segmented"), std::string::npos) << r.timing.algorithm;
}

TYPED_TEST(TypedRpcTest, SegmentedScanKeysAndHeads) {
  using T = TypeParam;
  const size_t n = MultiChunkSize<T>();
  for (bool exclusive : {false, true}) {
    CheckSegmented<T, ops::Sum, int64_t>(this->client_, n, v1::OPERATOR_SUM, exclusive, false);
    CheckSegmented<T, ops::Product, uint32_t>(this->client_, n, v1::OPERATOR_PRODUCT, exclusive, false);
    CheckSegmented<T, ops::Min, int32_t>(this->client_, n, v1::OPERATOR_MIN, exclusive, true);
    CheckSegmented<T, ops::Max, uint64_t>(this->client_, n, v1::OPERATOR_MAX, exclusive, false);
    if constexpr (std::is_integral_v<T>) {
      CheckSegmented<T, ops::BitXor, int32_t>(this->client_, n, v1::OPERATOR_BIT_XOR, exclusive, true);
    }
  }
  for (size_t small : {0, 1, 2, 17}) CheckSegmented<T, ops::Sum, int32_t>(this->client_, small, v1::OPERATOR_SUM, false, false);
}

// Reduce by key over the wire: runs spanning the client's chunks, runs of one element; float
// SUM/PRODUCT bit for bit the segmented scan's values at the runs' ends.
template <class T, template <class> class Op, class K>
void CheckReduceByKey(Client& client, size_t n, v1::Operator wire_op, size_t mean_run) {
  GPUSCAN_SEEDED_RNG(rng);
  const std::vector<T> x = testing::RandomInput<T, Op<T>>(n, rng);
  const std::vector<K> keys = testing::RandomSegmentKeys<K>(n, rng, mean_run);
  const ReduceByKeyResult<T, K> r = client.ReduceByKey(x, keys, wire_op);
  const auto want = testing::ReduceByKeyRef<T, Op<T>, K>(x, keys);
  const std::string what = std::string("reduce by key ") + v1::Operator_Name(wire_op) + ", n=" + std::to_string(n);
  EXPECT_EQ(r.keys, want.first) << what;
  if constexpr (testing::kRounds<T, Op<T>>) {
    const std::vector<T> scan = client.SegmentedScan(x, keys, SegmentedScanOptions{wire_op, false}).values;
    std::vector<T> ends;
    for (size_t i = 0; i < n; ++i) {
      if (i + 1 == n || keys[i + 1] != keys[i]) ends.push_back(scan[i]);
    }
    ASSERT_EQ(r.values.size(), ends.size()) << what;
    EXPECT_TRUE(testing::SameBytes(r.values.data(), ends.data(), ends.size() * sizeof(T))) << what;
  } else {
    testing::ExpectEqualValues(r.values, want.second, what);
  }
  EXPECT_EQ(r.timing.bytes_in, n * (sizeof(T) + sizeof(K))) << what;
  EXPECT_EQ(r.timing.bytes_out, want.first.size() * (sizeof(T) + sizeof(K))) << what;
}

TYPED_TEST(TypedRpcTest, ReduceByKeyRunsAcrossChunks) {
  using T = TypeParam;
  const size_t n = MultiChunkSize<T>();
  CheckReduceByKey<T, ops::Sum, int64_t>(this->client_, n, v1::OPERATOR_SUM, 900);
  CheckReduceByKey<T, ops::Product, uint32_t>(this->client_, n, v1::OPERATOR_PRODUCT, 1);
  CheckReduceByKey<T, ops::Min, int32_t>(this->client_, n, v1::OPERATOR_MIN, 40000);
  CheckReduceByKey<T, ops::Max, uint64_t>(this->client_, n, v1::OPERATOR_MAX, 20);
  for (size_t small : {0, 1, 2}) CheckReduceByKey<T, ops::Sum, int32_t>(this->client_, small, v1::OPERATOR_SUM, 1);
}

// Sorts over the wire: keys, the permutation and values moved along, ascending and descending,
// with many equal keys; floats with NaN, infinities and signed zeros. The order's reference is
// the engine-independent one of the unit test: a stable sort by the keys' codes taken from
// their bits here.
template <class T>
std::vector<int64_t> StableOrder(const std::vector<T>& keys, bool descending) {
  using U = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
  constexpr U kSign = U(1) << (8 * sizeof(T) - 1);
  std::vector<U> code(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    U u;
    std::memcpy(&u, &keys[i], sizeof(T));
    if constexpr (std::is_floating_point_v<T>) u = (u & kSign) ? U(~u) : U(u | kSign);
    else if constexpr (std::is_signed_v<T>) u ^= kSign;
    code[i] = u;
  }
  std::vector<int64_t> order(keys.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int64_t>(i);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return descending ? code[b] < code[a] : code[a] < code[b];
  });
  return order;
}

TYPED_TEST(TypedRpcTest, SortKeysArgsortAndPairs) {
  using T = TypeParam;
  GPUSCAN_SEEDED_RNG(rng);
  for (const size_t n : {size_t{0}, size_t{1}, MultiChunkSize<T>()}) {
    std::vector<T> keys(n);
    for (T& k : keys) {
      if constexpr (std::is_floating_point_v<T>) {
        const T specials[] = {std::numeric_limits<T>::quiet_NaN(), -std::numeric_limits<T>::quiet_NaN(),
                              std::numeric_limits<T>::infinity(), -std::numeric_limits<T>::infinity(), T(0), -T(0)};
        k = rng() % 8 == 0 ? specials[rng() % 6] : T(int(rng() % 50) - 25) / T(4);
      } else {
        k = rng() % 2 ? static_cast<T>(rng() % 50) : testing::UniformInt<T>(rng);
      }
    }
    std::vector<double> values(n);
    for (size_t i = 0; i < n; ++i) values[i] = static_cast<double>(i) + 0.5;
    for (const bool descending : {false, true}) {
      const std::vector<int64_t> order = StableOrder(keys, descending);
      std::vector<T> want(n);
      std::vector<double> want_values(n);
      for (size_t i = 0; i < n; ++i) {
        want[i] = keys[order[i]];
        want_values[i] = values[order[i]];
      }
      const std::string what = std::string(descending ? "descending" : "ascending") + " n=" + std::to_string(n);
      const SortResult<T> s = this->client_.Sort(keys.data(), n, descending);
      ASSERT_EQ(s.keys.size(), n) << what;
      EXPECT_TRUE(testing::SameBytes(s.keys.data(), want.data(), n * sizeof(T))) << what;
      EXPECT_EQ(this->client_.Argsort(keys.data(), n, descending).indices, order) << what;
      const SortResult<T, double> p = this->client_.SortPairs(keys.data(), values.data(), n, descending);
      EXPECT_EQ(p.values, want_values) << what;
      EXPECT_TRUE(testing::SameBytes(p.keys.data(), want.data(), n * sizeof(T))) << what;
      EXPECT_FALSE(p.timing.algorithm.empty());
    }
  }
}

// A second stream shorter than the first reaches the server as the caller sent it, and is refused
// with both lengths. The client once sent a Sort request's values field again, unchanged, in the
// request after the values had ended: 12 keys with 10 values, 4 a request, went out as 12 and 12
// and were sorted with two made-up values (found 2026-11-26).
TEST_F(RpcTest, KeyedStreamsOfUnequalLengthAreRefusedWithTheirLengths) {
  Client small(server_->client_options(16));  // 4 four-byte elements a request
  auto source = [](const std::vector<int32_t>& v) {
    return Source([&v, at = size_t{0}](void* buf, size_t max) mutable {
      const size_t n = std::min(max, (v.size() - at / sizeof(int32_t)) * sizeof(int32_t));
      std::memcpy(buf, reinterpret_cast<const char*>(v.data()) + at, n);
      at += n;
      return n;
    });
  };
  std::vector<int32_t> twelve(12), ten(10);
  for (size_t i = 0; i < twelve.size(); ++i) twelve[i] = static_cast<int32_t>(997 * i % 13) - 6;
  for (size_t i = 0; i < ten.size(); ++i) ten[i] = static_cast<int32_t>(i * 7 + 1);
  auto expect_refused = [](auto&& call, const std::string& message) {
    try {
      call();
      ADD_FAILURE() << "accepted; expected INVALID_ARGUMENT with " << message;
    } catch (const RpcError& e) {
      EXPECT_EQ(e.code(), grpc::StatusCode::INVALID_ARGUMENT) << e.what();
      EXPECT_NE(e.message().find(message), std::string::npos) << e.message();
    }
  };
  v1::SortHeader sort;
  sort.set_dtype(v1::DTYPE_INT32);
  sort.set_output(v1::SORT_OUTPUT_KEYS_AND_VALUES);
  sort.set_values_dtype(v1::DTYPE_INT32);
  expect_refused([&] { small.SortStream(sort, source(twelve), source(ten), {}, {}, {}); },
                 "values length 10 differs from keys length 12");
  v1::SegmentedScanHeader seg;
  seg.set_dtype(v1::DTYPE_INT32);
  seg.set_op(v1::OPERATOR_SUM);
  seg.set_key_dtype(v1::DTYPE_INT32);
  expect_refused([&] { small.SegmentedScanStream(seg, source(twelve), source(ten), {}); },
                 "keys length 10 differs from data length 12");
  v1::ReduceByKeyHeader rbk;
  rbk.set_dtype(v1::DTYPE_INT32);
  rbk.set_op(v1::OPERATOR_SUM);
  rbk.set_key_dtype(v1::DTYPE_INT32);
  expect_refused([&] { small.ReduceByKeyStream(rbk, source(twelve), source(ten), {}, {}); },
                 "keys length 10 differs from data length 12");
  const std::vector<char> ten_flags = {1, 0, 1, 1, 0, 0, 1, 0, 1, 1};
  v1::CompactHeader compact;
  compact.set_dtype(v1::DTYPE_INT32);
  compact.set_use_flags(true);
  expect_refused(
      [&] {
        Source flags([&, at = size_t{0}](void* buf, size_t max) mutable {
          const size_t n = std::min(max, ten_flags.size() - at);
          std::memcpy(buf, ten_flags.data() + at, n);
          at += n;
          return n;
        });
        small.CompactStream(compact, source(twelve), flags, {}, {});
      },
      "flags length 10 differs from values length 12");
}

TYPED_TEST(TypedRpcTest, HistogramEvenAndExplicitEdges) {
  using T = TypeParam;
  GPUSCAN_SEEDED_RNG(rng);
  HistogramBins even;
  even.bins = 41;
  even.lo = -97.3;
  even.hi = 101.9;
  HistogramBins uneven;
  // Repeats, and edges no float32 holds (-33.3, 0.1, 12.3456789): a float32 element at an
  // edge's float32 rounding compares with the edge itself in float64, as numpy promotes it.
  uneven.edges = {-100, -50, -50, -33.3, -3.25, 0, 0, 0.1, 7, 12.3456789, 64, 64, 99.5};
  for (size_t n : {size_t{0}, size_t{1}, MultiChunkSize<T>()}) {
    for (const HistogramBins& bins : {even, uneven}) {
      const bool is_even = bins.edges.empty();
      SCOPED_TRACE(::testing::Message() << "n=" << n << " even=" << is_even);
      // The server's even edges are numpy's: float64 linspace, rounded for float32 arrays.
      const std::vector<double> edges =
          is_even ? hist::EvenEdges(bins.lo, bins.hi, bins.bins, std::is_same_v<T, float>) : bins.edges;
      const std::vector<T> x = testing::HistogramInput<T>(n, edges, rng);
      const HistogramResult r = this->client_.Histogram(x, bins);
      std::vector<uint64_t> want = testing::HistogramRef(x, edges);
      const size_t nb = edges.size() - 1;
      EXPECT_EQ(r.edges, edges);
      EXPECT_EQ(r.below, want[nb]);
      EXPECT_EQ(r.above, want[nb + 1]);
      EXPECT_EQ(r.nan_count, want[nb + 2]);
      want.resize(nb);
      EXPECT_EQ(r.counts, want);
      EXPECT_EQ(r.element_count, n);
      EXPECT_EQ(r.timing.bytes_in, n * sizeof(T));
    }
  }
}

// 2-D scans over the wire: shapes whose rows are shorter than a chunk, cross chunks, and are
// longer than one (the chunks end mid-row), bit for bit Scan2DRef, whatever the client's
// chunk size.
template <class T, template <class> class Op>
void CheckScan2D(size_t rows, size_t cols, v1::Operator wire_op, TestServer& server) {
  GPUSCAN_SEEDED_RNG(rng);
  const std::vector<T> x = testing::RandomInput<T, Op<T>>(rows * cols, rng);
  const std::vector<T> ref = testing::Scan2DRef<T, Op<T>>(x, rows, cols);
  const std::string what = std::string(v1::Operator_Name(wire_op)) + " " + std::to_string(rows) + " x " +
                           std::to_string(cols);
  for (const size_t chunk : {size_t{4096}, RpcTest::kChunkBytes, size_t{3000} / sizeof(T) * sizeof(T)}) {
    Client client(server.client_options(chunk));
    const ScanResult<T> r = client.Scan2D(x.data(), rows, cols, wire_op);
    ASSERT_TRUE(testing::SameBits(r.values, ref)) << what << ", chunks of " << chunk << " bytes";
    EXPECT_EQ(r.timing.bytes_in, rows * cols * sizeof(T)) << what;
  }
}

TYPED_TEST(TypedRpcTest, Scan2DRowsAcrossChunks) {
  using T = TypeParam;
  CheckScan2D<T, ops::Sum>(300, 130, v1::OPERATOR_SUM, *this->server_);
  CheckScan2D<T, ops::Product>(7, 3001, v1::OPERATOR_PRODUCT, *this->server_);
  CheckScan2D<T, ops::Min>(1000, 1, v1::OPERATOR_MIN, *this->server_);
  CheckScan2D<T, ops::Max>(2, 20000, v1::OPERATOR_MAX, *this->server_);
  CheckScan2D<T, ops::Sum>(0, 5, v1::OPERATOR_SUM, *this->server_);
  CheckScan2D<T, ops::Sum>(1, 1, v1::OPERATOR_SUM, *this->server_);
}

// Axis scans over the wire (issue 47): both axes, inclusive and exclusive, rows shorter than a
// chunk, across chunks and longer than one, bit for bit ScanAxisRef (numpy's association).
template <class T, template <class> class Op>
void CheckScanAlong(size_t rows, size_t cols, v1::Operator wire_op, TestServer& server) {
  GPUSCAN_SEEDED_RNG(rng);
  const std::vector<T> x = testing::RandomInput<T, Op<T>>(rows * cols, rng);
  for (int axis : {0, 1}) {
    for (bool exclusive : {false, true}) {
      const std::vector<T> ref = testing::ScanAxisRef<T, Op<T>>(x, rows, cols, axis == 1, exclusive);
      const std::string what = std::string(v1::Operator_Name(wire_op)) + " " + std::to_string(rows) + " x " +
                               std::to_string(cols) + " axis " + std::to_string(axis) + (exclusive ? " exclusive" : "");
      for (const size_t chunk : {size_t{4096}, size_t{3000} / sizeof(T) * sizeof(T)}) {
        Client client(server.client_options(chunk));
        const ScanResult<T> r = client.ScanAlong(x.data(), rows, cols, axis, wire_op, exclusive);
        ASSERT_TRUE(testing::SameBits(r.values, ref)) << what << ", chunks of " << chunk << " bytes";
        EXPECT_EQ(r.timing.bytes_in, rows * cols * sizeof(T)) << what;
      }
    }
  }
}

TYPED_TEST(TypedRpcTest, ScanAlongEitherAxisAcrossChunks) {
  using T = TypeParam;
  CheckScanAlong<T, ops::Sum>(300, 130, v1::OPERATOR_SUM, *this->server_);
  CheckScanAlong<T, ops::Product>(7, 3001, v1::OPERATOR_PRODUCT, *this->server_);
  CheckScanAlong<T, ops::Min>(1000, 1, v1::OPERATOR_MIN, *this->server_);
  CheckScanAlong<T, ops::Max>(2, 20000, v1::OPERATOR_MAX, *this->server_);
  CheckScanAlong<T, ops::Sum>(0, 5, v1::OPERATOR_SUM, *this->server_);
  CheckScanAlong<T, ops::Sum>(1, 1, v1::OPERATOR_SUM, *this->server_);
  Client client(this->server_->client_options());
  EXPECT_THROW(client.ScanAlong<T>(nullptr, 0, 1, 2), std::invalid_argument);
}

// An array in memory leaves in slices that point into it (client/src/raw_messages.h
// BorrowedSlices). A call the server refuses while the upload is still going returns only once
// gRPC has let go of every slice, so the caller may free the array at once: under ASan a late
// read is a heap-use-after-free. Every raw call that borrows, on one stream and on lanes.
TEST_F(RpcTest, AnArrayRefusedMidUploadMayBeFreedWhenTheCallReturns) {
  constexpr size_t kElements = 4 << 20;  // 16 MiB of int32: 256 requests of 64 KiB
  std::mt19937 rng(1126);
  auto expect_refused = [](auto&& call) {
    try {
      call();
      ADD_FAILURE() << "accepted; expected INVALID_ARGUMENT naming header.element_count";
    } catch (const RpcError& e) {
      EXPECT_EQ(e.code(), grpc::StatusCode::INVALID_ARGUMENT) << e.what();
      EXPECT_NE(e.message().find("header.element_count=1000"), std::string::npos) << e.message();
    }
  };
  for (uint32_t lanes : {1u, 3u}) {
    for (int round = 0; round < 3; ++round) {
      auto array = std::make_unique<std::vector<int32_t>>(kElements);
      for (int32_t& x : *array) x = static_cast<int32_t>(rng() % 2001) - 1000;
      const uint64_t bytes = kElements * sizeof(int32_t);
      const SourceAt in = SourceAt::Memory(array->data(), bytes);
      v1::ScanHeader scan;
      scan.set_dtype(v1::DTYPE_INT32);
      scan.set_op(v1::OPERATOR_SUM);
      scan.set_element_count(1000);  // the server refuses the request that goes past it
      expect_refused([&] { client_.ScanStream(scan, in, [](const void*, size_t) {}, {}, lanes); });
      v1::ReduceHeader reduce;
      reduce.set_dtype(v1::DTYPE_INT32);
      reduce.set_op(v1::OPERATOR_SUM);
      reduce.set_element_count(1000);
      expect_refused([&] { client_.ReduceStream(reduce, in, {}, lanes); });
      v1::CompactHeader compact;
      compact.set_dtype(v1::DTYPE_INT32);
      compact.set_element_count(1000);
      compact.mutable_predicate()->set_op(v1::PREDICATE_OP_GT);
      compact.mutable_predicate()->mutable_threshold()->set_int_value(0);
      expect_refused([&] {
        client_.CompactStream(compact, in, {}, [](const void*, size_t) {}, {}, {}, lanes);
      });
      array.reset();  // nothing may read it from here on
    }
  }
  // The channel still serves, and an array in memory still scans to the right answer.
  std::vector<int32_t> x(3 * kChunkBytes / sizeof(int32_t) + 5);
  for (int32_t& v : x) v = static_cast<int32_t>(rng() % 2001) - 1000;
  std::vector<int32_t> expected(x.size());
  int32_t run = 0;
  for (size_t i = 0; i < x.size(); ++i) expected[i] = run += x[i];
  EXPECT_EQ(client_.Scan(x).values, expected);
}

TEST_F(RpcTest, ServerInfoDescribesEngineAndLimits) {
  const v1::ServerInfo info = client_.Info();
  EXPECT_EQ(info.version(), GPUSCAN_VERSION);
  EXPECT_EQ(info.engine(), server_->server().engine().name());
  EXPECT_EQ(info.dtypes_size(), 6);
  EXPECT_EQ(info.narrow_dtypes_size(), 5);
  EXPECT_EQ(info.operators_size(), 7);
  EXPECT_EQ(std::vector<std::string>(info.operations().begin(), info.operations().end()),
            (std::vector<std::string>{"scan", "reduce", "compact", "histogram", "segmented_scan", "reduce_by_key", "sort",
                                      "scan2d", "scan_axis", "scan_carry"}));
  EXPECT_EQ(info.limits().max_histogram_bins(), 65536u);
  EXPECT_EQ(info.limits().max_scan2d_row_bytes(), uint64_t{64} << 20);
  EXPECT_GT(info.scan_algorithms_size(), 0);
  EXPECT_GT(info.limits().max_chunk_bytes(), 0u);
  EXPECT_GT(info.limits().max_concurrent_requests(), 0u);
}

TEST_F(RpcTest, HealthServing) {
  EXPECT_EQ(client_.Health(), "SERVING");
  EXPECT_EQ(client_.Health("gpuscan.v1.GpuScan"), "SERVING");
}

TEST_F(RpcTest, TimingCountsChunks) {
  GPUSCAN_SEEDED_RNG(rng);
  const size_t per_chunk = kChunkBytes / sizeof(int32_t);
  const std::vector<int32_t> x = testing::RandomInput<int32_t, ops::Sum<int32_t>>(5 * per_chunk, rng);
  const ScanResult<int32_t> r = client_.Scan(x);
  EXPECT_EQ(r.timing.chunks, 5u);
  EXPECT_EQ(r.values.back(), (testing::ReduceRef<int32_t, ops::Sum<int32_t>>(x)));
}

// Small chunks run on gRPC's own thread and larger ones on a worker (StreamingCall::RunsInline):
// one call whose chunks cross kSmallChunkBytes both ways, in every order, keeps its prefix,
// its order and its counts; int32 (exact) and float32 (the deterministic tree, bit for bit
// against the same array sent in 1 MiB chunks).
TEST_F(RpcTest, ScanChunksCrossingTheInlineSizeBothWays) {
  GPUSCAN_SEEDED_RNG(rng);
  const size_t small = engine::kSmallChunkBytes / 4;  // elements of 4 bytes
  const std::vector<size_t> chunks = {1000, small, small + 1, 3, 5 * small, 1, small - 1, 2 * small + 7, 17, 4096};
  size_t n = 0;
  for (size_t c : chunks) n += c;
  auto stub = server_->stub();
  auto run = [&](v1::DType dtype, const void* data) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    auto stream = stub->Scan(&ctx);
    size_t at = 0;
    for (size_t i = 0; i < chunks.size(); ++i) {
      v1::ScanRequest req;
      if (i == 0) {
        req.mutable_header()->set_dtype(dtype);
        req.mutable_header()->set_op(v1::OPERATOR_SUM);
        req.mutable_header()->set_element_count(n);
      }
      req.set_data(static_cast<const char*>(data) + 4 * at, 4 * chunks[i]);
      at += chunks[i];
      EXPECT_TRUE(stream->Write(req));
    }
    stream->WritesDone();
    std::string out;
    v1::ScanResponse resp;
    uint64_t offset = 0, responses = 0, count = 0, timing_chunks = 0;
    while (stream->Read(&resp)) {
      if (resp.has_timing()) {
        count = resp.element_count();
        timing_chunks = resp.timing().chunks();
        continue;
      }
      EXPECT_EQ(resp.offset(), offset) << "response " << responses;
      EXPECT_EQ(resp.data().size(), 4 * chunks[responses]) << "response " << responses;
      offset += resp.data().size() / 4;
      out += resp.data();
      ++responses;
    }
    const grpc::Status s = stream->Finish();
    EXPECT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(responses, chunks.size());
    EXPECT_EQ(count, n);
    EXPECT_EQ(timing_chunks, chunks.size());
    return out;
  };
  const std::vector<int32_t> xi = testing::RandomInput<int32_t, ops::Sum<int32_t>>(n, rng);
  const std::string gi = run(v1::DTYPE_INT32, xi.data());
  const std::vector<int32_t> want = testing::ScanRef<int32_t, ops::Sum<int32_t>>(xi, false);
  ASSERT_EQ(gi.size(), 4 * n);
  EXPECT_EQ(std::memcmp(gi.data(), want.data(), gi.size()), 0);

  const std::vector<float> xf = testing::RandomInput<float, ops::Sum<float>>(n, rng);
  const std::string gf = run(v1::DTYPE_FLOAT32, xf.data());
  Client whole(server_->client_options(1 << 20));
  const std::vector<float> wf = whole.Scan(xf).values;
  ASSERT_EQ(gf.size(), 4 * n);
  EXPECT_EQ(std::memcmp(gf.data(), wf.data(), gf.size()), 0) << "float32 bits differ from the 1 MiB chunking";
}

}  // namespace
}  // namespace gpuscan
