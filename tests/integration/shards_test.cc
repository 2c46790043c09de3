// Shards: one array split across several servers (ClientOptions::shards) gives exactly the
// single call's result for every RPC at lengths around chunk boundaries (more shards than
// chunks, n = 0 and 1); float SUM/PRODUCT under the deterministic default stay one call, so
// their bits match too; a shard whose server is gone fails the call naming the shard and the
// server. Three CPU servers on loopback, one ipv4: list target; small chunks (64 elements).
#include <cstring>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "reference.h"
#include "test_server.h"

namespace gpuscan {
namespace {

using ::testing::HasSubstr;
using testing::TestServer;

constexpr size_t kShardChunkBytes = 256;

class ShardsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    for (auto& s : servers_) s = new TestServer();
  }
  static void TearDownTestSuite() {
    for (auto& s : servers_) {
      delete s;
      s = nullptr;
    }
  }
  // The three servers as one target.
  static ClientOptions Options() {
    ClientOptions o = servers_[0]->client_options(kShardChunkBytes);
    o.target = "ipv4:" + servers_[0]->target() + "," + servers_[1]->target() + "," + servers_[2]->target();
    return o;
  }
  static TestServer* servers_[3];
};
TestServer* ShardsTest::servers_[3] = {};

using testing::SameBits;

template <class T, template <class> class Op>
void CheckScanShards(Client& client, v1::Operator op, bool exclusive) {
  GPUSCAN_SEEDED_RNG(rng);
  for (size_t n : testing::ChunkBoundaryLengths(kShardChunkBytes / sizeof(T))) {
    const std::vector<T> x = testing::RandomInput<T, Op<T>>(n, rng);
    ScanOptions one;
    one.op = op;
    one.exclusive = exclusive;
    one.shards = 1;
    const auto single = client.Scan(x, one).values;
    ASSERT_EQ(single.size(), n);
    for (uint32_t k : {2u, 3u, 4u, 16u}) {
      ScanOptions o = one;
      o.shards = k;
      const auto r = client.Scan(x, o);
      SCOPED_TRACE("n=" + std::to_string(n) + " shards=" + std::to_string(k));
      ASSERT_EQ(r.values.size(), n);
      EXPECT_TRUE(SameBits(r.values, single)) << "shards differ from one call";
      EXPECT_EQ(r.timing.bytes_in, n * sizeof(T));
      // Into the caller's buffer: poisoned first, so a range no shard wrote shows.
      std::vector<T> into(n + 1);
      std::memset(static_cast<void*>(into.data()), 0xA5, into.size() * sizeof(T));
      const T guard = into[n];
      const Timing t = client.ScanInto(x.data(), n, into.data(), o);
      EXPECT_EQ(t.bytes_in, n * sizeof(T));
      EXPECT_TRUE(n == 0 || std::memcmp(into.data(), single.data(), n * sizeof(T)) == 0)
          << "ScanInto differs from one call";
      EXPECT_EQ(0, std::memcmp(&into[n], &guard, sizeof(T))) << "ScanInto wrote past n";
    }
    std::vector<T> into(n);
    client.ScanInto(x.data(), n, into.data(), one);
    EXPECT_TRUE(SameBits(into, single)) << "ScanInto without shards differs from Scan";
  }
}

TEST_F(ShardsTest, ScanEqualsSingleCall) {
  Client client(Options());
  CheckScanShards<int32_t, ops::Sum>(client, v1::OPERATOR_SUM, false);
  CheckScanShards<int32_t, ops::Sum>(client, v1::OPERATOR_SUM, true);
  CheckScanShards<int64_t, ops::Max>(client, v1::OPERATOR_MAX, true);
  CheckScanShards<uint32_t, ops::BitXor>(client, v1::OPERATOR_BIT_XOR, false);
  CheckScanShards<uint64_t, ops::Product>(client, v1::OPERATOR_PRODUCT, true);
  CheckScanShards<float, ops::Min>(client, v1::OPERATOR_MIN, false);
  CheckScanShards<double, ops::Max>(client, v1::OPERATOR_MAX, true);
  // Deterministic float SUM/PRODUCT: one call whatever the shards, so the same bits.
  CheckScanShards<float, ops::Sum>(client, v1::OPERATOR_SUM, false);
  CheckScanShards<double, ops::Product>(client, v1::OPERATOR_PRODUCT, true);
}

template <class T, template <class> class Op>
void CheckReduceShards(Client& client, v1::Operator op) {
  GPUSCAN_SEEDED_RNG(rng);
  for (size_t n : testing::ChunkBoundaryLengths(kShardChunkBytes / sizeof(T))) {
    const std::vector<T> x = testing::RandomInput<T, Op<T>>(n, rng);
    const auto single = client.Reduce(x, op, 1, 1);
    for (uint32_t k : {2u, 3u, 16u}) {
      const auto r = client.Reduce(x, op, 1, k);
      SCOPED_TRACE("n=" + std::to_string(n) + " shards=" + std::to_string(k));
      EXPECT_EQ(0, std::memcmp(&r.value, &single.value, sizeof(T))) << "shards differ from one call";
      EXPECT_EQ(r.element_count, n);
    }
  }
}

TEST_F(ShardsTest, ReduceEqualsSingleCall) {
  Client client(Options());
  CheckReduceShards<int32_t, ops::Sum>(client, v1::OPERATOR_SUM);
  CheckReduceShards<int64_t, ops::BitAnd>(client, v1::OPERATOR_BIT_AND);
  CheckReduceShards<uint32_t, ops::Max>(client, v1::OPERATOR_MAX);
  CheckReduceShards<uint64_t, ops::Product>(client, v1::OPERATOR_PRODUCT);
  CheckReduceShards<float, ops::Max>(client, v1::OPERATOR_MAX);
  CheckReduceShards<double, ops::Min>(client, v1::OPERATOR_MIN);
  CheckReduceShards<float, ops::Sum>(client, v1::OPERATOR_SUM);  // one call (deterministic)
}

template <class T>
void CheckCompactShards(Client& client) {
  GPUSCAN_SEEDED_RNG(rng);
  for (size_t n : testing::ChunkBoundaryLengths(kShardChunkBytes / sizeof(T))) {
    const std::vector<T> x = testing::RandomCompactInput<T>(n, rng);
    for (int mode = 0; mode < 3; ++mode) {
      CompactOptions one;
      if (mode == 0) {
        one.use_flags = true;
        one.flags = testing::RandomFlags(n, rng, 0.3);
        one.output = v1::COMPACT_OUTPUT_VALUES_AND_INDICES;
      } else {
        one.predicate.set_op(v1::PREDICATE_OP_NONZERO);
        one.output = mode == 1 ? v1::COMPACT_OUTPUT_INDICES : v1::COMPACT_OUTPUT_VALUES;
      }
      one.shards = 1;
      const auto single = client.Compact(x, one);
      for (uint32_t k : {2u, 3u, 16u}) {
        CompactOptions o = one;
        o.shards = k;
        const auto r = client.Compact(x, o);
        SCOPED_TRACE("n=" + std::to_string(n) + " shards=" + std::to_string(k) + " mode=" + std::to_string(mode));
        EXPECT_TRUE(SameBits(r.values, single.values));
        EXPECT_EQ(r.indices, single.indices);
        EXPECT_EQ(r.kept_count, single.kept_count);
      }
    }
  }
}

TEST_F(ShardsTest, CompactEqualsSingleCall) {
  Client client(Options());
  CheckCompactShards<int32_t>(client);
  CheckCompactShards<uint64_t>(client);
  CheckCompactShards<float>(client);
}

// The client's default (ClientOptions::shards), with lanes inside each shard.
TEST_F(ShardsTest, ClientDefaultWithLanes) {
  ClientOptions co = Options();
  co.shards = 3;
  co.lanes = 2;
  Client client(co);
  GPUSCAN_SEEDED_RNG(rng);
  const auto x = testing::RandomInput<int64_t, ops::Sum<int64_t>>(5000, rng);
  EXPECT_EQ(client.Scan(x).values, (testing::ScanRef<int64_t, ops::Sum<int64_t>>(x, false)));
  EXPECT_EQ(client.Reduce(x, v1::OPERATOR_SUM).value, (testing::ReduceRef<int64_t, ops::Sum<int64_t>>(x)));
}

// Shards really go to every server: with one of two servers gone, a two-shard call fails with
// UNAVAILABLE naming the shard and the dead server, whichever shard it got; one call on the
// live server still works.
TEST_F(ShardsTest, ShardOnDeadServerFailsNamingIt) {
  std::string dead;
  {
    TestServer gone;
    dead = gone.target();
  }
  ClientOptions co = servers_[0]->client_options(kShardChunkBytes);
  co.target = "ipv4:" + servers_[0]->target() + "," + dead;
  co.timeout = std::chrono::seconds(10);
  Client client(co);
  GPUSCAN_SEEDED_RNG(rng);
  const auto x = testing::RandomInput<int32_t, ops::Sum<int32_t>>(4000, rng);
  for (int attempt = 0; attempt < 2; ++attempt) {  // the rotation puts the dead server on shard 0, then 1
    ScanOptions o;
    o.shards = 2;
    try {
      client.Scan(x, o);
      ADD_FAILURE() << "a shard on a dead server succeeded";
    } catch (const RpcError& e) {
      EXPECT_EQ(e.code(), grpc::StatusCode::UNAVAILABLE) << e.what();
      EXPECT_THAT(e.message(), HasSubstr("of 2 (server ipv4:" + dead + ")"));
    }
  }
  ClientOptions live = servers_[0]->client_options(kShardChunkBytes);
  Client one(live);
  ScanOptions o;
  o.shards = 2;  // one address: two connections to the same server
  EXPECT_EQ(one.Scan(x, o).values, (testing::ScanRef<int32_t, ops::Sum<int32_t>>(x, false)));
}

}  // namespace
}  // namespace gpuscan
