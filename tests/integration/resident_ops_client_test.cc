// gpuscan's typed operations on resident arrays beyond Scan and Reduce (resident_ops.h: Compact,
// Histogram, SegmentedScan(Heads), ReduceByKey, Sort, Argsort, SortPairs, Scan2D, ScanAlong)
// against an in-process server with --resident-bytes: results bit for bit the same Client's
// streamed calls', on random data (never zeros) of every 4- and 8-byte dtype at sizes around the
// chunk boundaries; the keeping forms' RemoteArrays read back as the streamed results; misuse
// refused before any call (std::invalid_argument) or by the server.
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "gpuscan/resident_ops.h"
#include "reference.h"  // SameBits
#include "test_server.h"

// A namespace of its own: the unity build puts this file beside others with helpers of these names
// (and types and functions of the client's names: so those are named ::gpuscan::).
namespace gpuscan::testing::resident_ops_client {
namespace {

constexpr size_t kChunk = 4096;  // the server's and the client's chunk: arrays cross many

server::ServerOptions ResidentServer() {
  server::ServerOptions o;
  o.chunk_bytes = kChunk;
  o.resident_bytes = uint64_t{64} << 20;
  return o;
}

// Random nonzero elements; floats finite and small so sums and products stay meaningful.
template <class T>
std::vector<T> Random(size_t n, uint32_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<T> v(n);
  for (T& x : v) {
    if constexpr (std::is_floating_point_v<T>) {
      do x = std::uniform_real_distribution<T>(T(-1.5), T(1.5))(rng); while (x == 0);
    } else {
      do x = static_cast<T>(rng() % 1000 + 1); while (x == 0);
    }
  }
  return v;
}

// Runs of 1-4 equal keys.
template <class K>
std::vector<K> Keys(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<K> k;
  while (k.size() < n) k.insert(k.end(), rng() % 4 + 1, static_cast<K>(rng() % 50));
  k.resize(n);
  return k;
}

std::vector<uint8_t> Flags(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> f(n);
  for (uint8_t& b : f) b = rng() % 3 == 0;
  return f;
}

// Flags and heads: a UINT8 array (the typed Put takes the 4- and 8-byte dtypes).
RemoteArray PutBytes(Client& c, const std::vector<uint8_t>& bytes) {
  return c.Put(v1::DTYPE_UINT8, bytes.data(), bytes.size());
}

template <class T>
std::vector<size_t> Sizes() {
  const size_t c = kChunk / sizeof(T);
  return {1, c - 1, c, c + 1, 3 * c + 1};
}

class ResidentOpsTest : public ::testing::Test {
 protected:
  TestServer server_{ResidentServer()};
  Client client_{server_.client_options(kChunk)};
};

template <class T>
class ResidentOpsTyped : public ResidentOpsTest {};
using ElementTypes = ::testing::Types<int32_t, int64_t, uint32_t, uint64_t, float, double>;
TYPED_TEST_SUITE(ResidentOpsTyped, ElementTypes);

TYPED_TEST(ResidentOpsTyped, CompactAndHistogram) {
  using T = TypeParam;
  Client& c = this->client_;
  uint32_t seed = 1;
  for (size_t n : Sizes<T>()) {
    const std::vector<T> x = Random<T>(n, seed++);
    const std::vector<uint8_t> flags = Flags(n, seed++);
    RemoteArray a = c.Put(x), f = PutBytes(c, flags);
    for (v1::CompactOutput output : {v1::COMPACT_OUTPUT_VALUES, v1::COMPACT_OUTPUT_INDICES,
                                     v1::COMPACT_OUTPUT_VALUES_AND_INDICES}) {
      CompactOptions by_flags;
      by_flags.output = output;
      CompactOptions host_flags = by_flags;
      host_flags.flags = flags;
      const ::gpuscan::CompactResult<T> streamed = c.Compact(x, host_flags);
      const ::gpuscan::CompactResult<T> resident = ::gpuscan::Compact<T>(a, by_flags, &f);
      EXPECT_TRUE(SameBits(resident.values, streamed.values)) << n << " output " << output;
      EXPECT_TRUE(SameBits(resident.indices, streamed.indices)) << n;
      EXPECT_EQ(resident.kept_count, streamed.kept_count);
      const KeptArrays kept = ::gpuscan::Compact(a, by_flags, &f, {std::chrono::seconds(60), "kept"});
      EXPECT_EQ(kept.count, streamed.kept_count);
      EXPECT_EQ(bool(kept.values), output != v1::COMPACT_OUTPUT_INDICES);
      EXPECT_EQ(bool(kept.indices), output != v1::COMPACT_OUTPUT_VALUES);
      if (kept.values) EXPECT_TRUE(SameBits(kept.values.template Get<T>(), streamed.values)) << n;
      if (kept.indices) EXPECT_TRUE(SameBits(kept.indices.template Get<int64_t>(), streamed.indices)) << n;

      CompactOptions gt;
      gt.output = output;
      gt.predicate.set_op(v1::PREDICATE_OP_GT);
      if constexpr (std::is_floating_point_v<T>) {
        gt.predicate.mutable_threshold()->set_float_value(0.25);
      } else if constexpr (std::is_signed_v<T>) {
        gt.predicate.mutable_threshold()->set_int_value(500);
      } else {
        gt.predicate.mutable_threshold()->set_uint_value(500);
      }
      const ::gpuscan::CompactResult<T> streamed_gt = c.Compact(x, gt);
      EXPECT_TRUE(SameBits(::gpuscan::Compact<T>(a, gt).values, streamed_gt.values)) << n;
      EXPECT_TRUE(SameBits(::gpuscan::Compact<T>(a, gt).indices, streamed_gt.indices)) << n;
    }
    const HistogramBins bins{7, -1.0, 900.0, {}};
    const HistogramResult hs = c.Histogram(x, bins), hr = ::gpuscan::Histogram(a, bins);
    EXPECT_EQ(hr.counts, hs.counts) << n;
    EXPECT_EQ(hr.edges, hs.edges);
    EXPECT_EQ(hr.below + hr.above + hr.nan_count, hs.below + hs.above + hs.nan_count);
    EXPECT_EQ(hr.element_count, n);
  }
}

TYPED_TEST(ResidentOpsTyped, SegmentedScanAndReduceByKey) {
  using T = TypeParam;
  Client& c = this->client_;
  uint32_t seed = 50;
  for (size_t n : Sizes<T>()) {
    const std::vector<T> x = Random<T>(n, seed++);
    const std::vector<int64_t> keys = Keys<int64_t>(n, seed++);
    const std::vector<uint8_t> heads = Flags(n, seed++);
    RemoteArray a = c.Put(x), k = c.Put(keys), h = PutBytes(c, heads);
    for (bool exclusive : {false, true}) {
      SegmentedScanOptions o;
      o.op = v1::OPERATOR_MAX;
      o.exclusive = exclusive;
      const std::vector<T> by_keys = c.SegmentedScan(x, keys, o).values;
      EXPECT_TRUE(SameBits(::gpuscan::SegmentedScan<T>(a, k, o).values, by_keys)) << n << " excl " << exclusive;
      EXPECT_TRUE(SameBits(::gpuscan::SegmentedScan(a, k, o, {}).template Get<T>(), by_keys)) << n;
      o.op = v1::OPERATOR_SUM;
      const std::vector<T> by_heads = c.SegmentedScanHeads(x.data(), n, heads.data(), o).values;
      EXPECT_TRUE(SameBits(::gpuscan::SegmentedScanHeads<T>(a, h, o).values, by_heads)) << n;
      EXPECT_TRUE(SameBits(::gpuscan::SegmentedScanHeads(a, h, o, {}).template Get<T>(), by_heads)) << n;
    }
    const ::gpuscan::ReduceByKeyResult<T, int64_t> streamed = c.ReduceByKey(x, keys, v1::OPERATOR_SUM);
    const auto resident = ::gpuscan::ReduceByKey<T, int64_t>(a, k, v1::OPERATOR_SUM);
    EXPECT_TRUE(SameBits(resident.keys, streamed.keys)) << n;
    EXPECT_TRUE(SameBits(resident.values, streamed.values)) << n;
    const KeptArrays kept = ::gpuscan::ReduceByKey(a, k, v1::OPERATOR_SUM, {});
    EXPECT_EQ(kept.count, streamed.keys.size());
    EXPECT_TRUE(SameBits(kept.keys.template Get<int64_t>(), streamed.keys)) << n;
    EXPECT_TRUE(SameBits(kept.values.template Get<T>(), streamed.values)) << n;
  }
}

TYPED_TEST(ResidentOpsTyped, SortArgsortAndPairs) {
  using T = TypeParam;
  Client& c = this->client_;
  uint32_t seed = 80;
  for (size_t n : Sizes<T>()) {
    std::vector<T> x = Random<T>(n, seed++);
    for (size_t i = 0; i + 1 < n; i += 3) x[i + 1] = x[i];  // equal keys: stability shows
    const std::vector<uint32_t> v = Random<uint32_t>(n, seed++);
    RemoteArray a = c.Put(x), b = c.Put(v);
    for (bool descending : {false, true}) {
      const ::gpuscan::SortResult<T> keys = c.Sort(x.data(), n, descending);
      EXPECT_TRUE(SameBits(::gpuscan::Sort<T>(a, descending).keys, keys.keys)) << n;
      const ::gpuscan::SortResult<T> perm = c.Argsort(x.data(), n, descending);
      EXPECT_TRUE(SameBits(::gpuscan::Argsort<T>(a, descending).indices, perm.indices)) << n;
      const ::gpuscan::SortResult<T, uint32_t> pairs = c.SortPairs(x.data(), v.data(), n, descending);
      const ::gpuscan::SortResult<T, uint32_t> resident = ::gpuscan::SortPairs<T, uint32_t>(a, b, descending);
      EXPECT_TRUE(SameBits(resident.keys, pairs.keys)) << n;
      EXPECT_TRUE(SameBits(resident.values, pairs.values)) << n;
      const KeptArrays kept = ::gpuscan::Sort(a, &b, v1::SORT_OUTPUT_KEYS_AND_VALUES, descending, {});
      EXPECT_FALSE(kept.indices);
      EXPECT_TRUE(SameBits(kept.keys.template Get<T>(), pairs.keys)) << n;
      EXPECT_TRUE(SameBits(kept.values.template Get<uint32_t>(), pairs.values)) << n;
      const KeptArrays kept_perm = ::gpuscan::Sort(a, nullptr, v1::SORT_OUTPUT_KEYS_AND_INDICES, descending, {});
      EXPECT_FALSE(kept_perm.values);
      EXPECT_TRUE(SameBits(kept_perm.keys.template Get<T>(), keys.keys)) << n;
      EXPECT_TRUE(SameBits(kept_perm.indices.template Get<int64_t>(), perm.indices)) << n;
    }
  }
}

TYPED_TEST(ResidentOpsTyped, Scan2DAndScanAlong) {
  using T = TypeParam;
  Client& c = this->client_;
  uint32_t seed = 120;
  const std::vector<std::pair<size_t, size_t>> shapes{{1, 1}, {3, 5}, {kChunk / sizeof(T), 1}, {17, 129}, {70, 33}};
  for (auto [rows, cols] : shapes) {
    const std::vector<T> x = Random<T>(rows * cols, seed++);
    RemoteArray a = c.Put(x);
    const std::vector<T> table = c.Scan2D(x.data(), rows, cols, v1::OPERATOR_SUM).values;
    EXPECT_TRUE(SameBits(::gpuscan::Scan2D<T>(a, cols).values, table)) << rows << "x" << cols;
    const RemoteArray kept = ::gpuscan::Scan2D(a, cols, v1::OPERATOR_SUM, {});
    EXPECT_TRUE(SameBits(kept.template Get<T>(), table)) << rows << "x" << cols;
    for (int axis : {0, 1}) {
      for (bool exclusive : {false, true}) {
        const std::vector<T> along = c.ScanAlong(x.data(), rows, cols, axis, v1::OPERATOR_MAX, exclusive).values;
        const auto resident = ::gpuscan::ScanAlong<T>(a, cols, axis, v1::OPERATOR_MAX, exclusive);
        EXPECT_TRUE(SameBits(resident.values, along)) << axis;
        const RemoteArray kept = ::gpuscan::ScanAlong(a, cols, axis, v1::OPERATOR_MAX, exclusive, {});
        EXPECT_TRUE(SameBits(kept.template Get<T>(), along)) << axis;
      }
    }
  }
  EXPECT_EQ(c.ListArrays().arrays_size(), 0);  // every array dropped with its RemoteArray
}

TEST_F(ResidentOpsTest, KeptResultsChainAcrossOperations) {
  const size_t n = 5000;
  const std::vector<int32_t> k = Keys<int32_t>(n, 7);
  const std::vector<double> v = Random<double>(n, 8);
  RemoteArray keys = client_.Put(k), values = client_.Put(v);
  const KeptArrays sorted = ::gpuscan::Sort(keys, &values, v1::SORT_OUTPUT_KEYS_AND_VALUES, false, {});
  const KeptArrays runs = ::gpuscan::ReduceByKey(sorted.values, sorted.keys, v1::OPERATOR_SUM, {});
  const ::gpuscan::SortResult<int32_t, double> host_sorted = client_.SortPairs(k.data(), v.data(), n);
  const auto host_runs = client_.ReduceByKey(host_sorted.values, host_sorted.keys, v1::OPERATOR_SUM);
  EXPECT_TRUE(SameBits(runs.keys.Get<int32_t>(), host_runs.keys));
  EXPECT_TRUE(SameBits(client_.Scan<double>(runs.values).values, client_.Scan(host_runs.values).values));
}

TEST_F(ResidentOpsTest, MisuseIsRefusedBeforeOrByTheServer) {
  const std::vector<int32_t> x = Random<int32_t>(100, 1);
  RemoteArray a = client_.Put(x), short_flags = client_.Put(std::vector<uint32_t>(10, 1)), empty;
  CompactOptions o;
  o.use_flags = true;
  EXPECT_THROW(::gpuscan::Compact<int32_t>(a, o), std::invalid_argument);               // flags missing
  EXPECT_THROW(::gpuscan::Compact<int32_t>(a, {}, &short_flags), std::invalid_argument);  // another length
  o.flags = {1, 0};
  EXPECT_THROW(::gpuscan::Compact<int32_t>(a, o, &a), std::invalid_argument);  // host flags with a resident array
  EXPECT_THROW(::gpuscan::Sort<int64_t>(a), std::invalid_argument);            // another dtype
  EXPECT_THROW(::gpuscan::Sort<int32_t>(empty), std::invalid_argument);
  EXPECT_THROW(::gpuscan::Sort(a, nullptr, v1::SORT_OUTPUT_KEYS_AND_VALUES, false, {}), std::invalid_argument);
  EXPECT_THROW(::gpuscan::Scan2D<int32_t>(a, 7), std::invalid_argument);  // 100 is no matrix of 7 columns
  EXPECT_THROW(::gpuscan::ScanAlong<int32_t>(a, 10, 2), std::invalid_argument);
  TestServer other(ResidentServer());
  Client elsewhere(other.client_options(kChunk));
  RemoteArray theirs = elsewhere.Put(x);
  EXPECT_THROW((::gpuscan::SortPairs<int32_t, int32_t>(a, theirs)), std::invalid_argument);  // another Client's
  // The server judges what the client cannot: float keys, a 4-byte flags array.
  RemoteArray f = client_.Put(Random<float>(100, 2)), wide = client_.Put(std::vector<uint32_t>(100, 1));
  try {
    ::gpuscan::SegmentedScan<int32_t>(a, f);
    ADD_FAILURE() << "float keys accepted";
  } catch (const RpcError& e) {
    EXPECT_EQ(e.code(), grpc::StatusCode::INVALID_ARGUMENT) << e.what();
  }
  try {
    ::gpuscan::Compact<int32_t>(a, {}, &wide);
    ADD_FAILURE() << "a 4-byte flags array accepted";
  } catch (const RpcError& e) {
    EXPECT_EQ(e.code(), grpc::StatusCode::INVALID_ARGUMENT) << e.what();
  }
}

}  // namespace
}  // namespace gpuscan::testing::resident_ops_client
