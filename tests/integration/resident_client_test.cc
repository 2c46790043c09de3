// gpuscan::Client's resident arrays (Put, GetArray, DropArray, ListArrays, Scan and Reduce on a
// RemoteArray) against an in-process server with --resident-bytes: results bit for bit the
// streamed calls', on random data (never zeros) of every 4- and 8-byte dtype at sizes around the
// chunk boundaries; keep chains; tenants apart; RemoteArray's ownership (RAII drop, release, move).
#include <chrono>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include <gtest/gtest.h>

#include "reference.h"  // SameBits
#include "test_server.h"

// A namespace of its own: the unity build puts this file beside others with helpers of these names.
namespace gpuscan::testing::resident_client {
namespace {

constexpr size_t kChunk = 4096;  // the server's and the client's chunk: arrays cross many

server::ServerOptions ResidentServer(uint64_t budget = uint64_t{64} << 20) {
  server::ServerOptions o;
  o.chunk_bytes = kChunk;
  o.resident_bytes = budget;
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
      do x = static_cast<T>(rng()); while (x == 0);
    }
  }
  return v;
}

// Elements per chunk of T, and sizes around one and several chunks.
template <class T>
std::vector<size_t> Sizes() {
  const size_t c = kChunk / sizeof(T);
  return {1, c - 1, c, c + 1, 3 * c - 1, 3 * c, 3 * c + 1, 10007};
}

grpc::StatusCode CodeOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const RpcError& e) {
    return e.code();
  }
  return grpc::StatusCode::OK;
}

class ResidentClientTest : public ::testing::Test {
 protected:
  ClientOptions Options(const std::string& tenant = "") const {
    ClientOptions o = server_.client_options(kChunk);
    o.tenant = tenant;
    return o;
  }
  TestServer server_{ResidentServer()};
  Client client_{Options()};
};

template <class T>
class ResidentTyped : public ResidentClientTest {};
using ElementTypes = ::testing::Types<int32_t, int64_t, uint32_t, uint64_t, float, double>;
TYPED_TEST_SUITE(ResidentTyped, ElementTypes);

TYPED_TEST(ResidentTyped, PutAndGetRoundTripAroundChunkBoundaries) {
  using T = TypeParam;
  uint32_t seed = 1;
  for (size_t n : Sizes<T>()) {
    const std::vector<T> x = Random<T>(n, seed++);
    const auto before = std::chrono::system_clock::now();
    RemoteArray a = this->client_.Put(x, {std::chrono::seconds(60), "round-trip"});
    ASSERT_TRUE(a);
    EXPECT_EQ(a.id().size(), 24u);
    EXPECT_EQ(a.id_hex().size(), 48u);
    EXPECT_EQ(ArrayIdFromHex(a.id_hex()), a.id());
    EXPECT_EQ(a.dtype(), DTypeOf<T>());
    EXPECT_EQ(a.size(), n);
    EXPECT_EQ(a.bytes(), n * sizeof(T));
    EXPECT_EQ(a.label(), "round-trip");
    EXPECT_GT(a.ttl().count(), 0);
    EXPECT_GT(a.expires(), before);
    EXPECT_TRUE(SameBits(a.template Get<T>(), x)) << n;
    if (n > 10) {
      const std::vector<T> mid(x.begin() + 3, x.end() - 7);
      EXPECT_TRUE(SameBits(a.template Get<T>(3, n - 10), mid)) << n;
      EXPECT_TRUE(SameBits(a.template Get<T>(n - 1), std::vector<T>{x.back()}));
    }
    const std::string raw = a.Get();
    ASSERT_EQ(raw.size(), n * sizeof(T));
    EXPECT_EQ(std::memcmp(raw.data(), x.data(), raw.size()), 0);
  }
}

TYPED_TEST(ResidentTyped, ScanAndReduceEqualTheStreamedCallsBitForBit) {
  using T = TypeParam;
  uint32_t seed = 100;
  for (size_t n : Sizes<T>()) {
    const std::vector<T> x = Random<T>(n, seed++);
    RemoteArray a = this->client_.Put(x);
    for (v1::Operator op : {v1::OPERATOR_SUM, v1::OPERATOR_MAX, v1::OPERATOR_PRODUCT}) {
      for (bool exclusive : {false, true}) {
        ScanOptions o;
        o.op = op;
        o.exclusive = exclusive;
        const std::vector<T> streamed = this->client_.Scan(x, o).values;
        const ScanResult<T> resident = this->client_.template Scan<T>(a, o);
        EXPECT_TRUE(SameBits(resident.values, streamed)) << n << " op " << op << " excl " << exclusive;
        RemoteArray kept = this->client_.Scan(a, o, {std::chrono::milliseconds(0), "kept"});
        EXPECT_EQ(kept.dtype(), DTypeOf<T>());
        EXPECT_EQ(kept.size(), n);
        EXPECT_EQ(kept.label(), "kept");
        EXPECT_NE(kept.id(), a.id());
        EXPECT_TRUE(SameBits(kept.template Get<T>(), streamed)) << n << " op " << op << " excl " << exclusive;
      }
      const ReduceResult<T> streamed = this->client_.Reduce(x, op);
      const ReduceResult<T> resident = this->client_.template Reduce<T>(a, op);
      EXPECT_EQ(std::memcmp(&resident.value, &streamed.value, sizeof(T)), 0) << n << " op " << op;
      EXPECT_EQ(resident.element_count, n);
    }
  }
  EXPECT_EQ(this->client_.ListArrays().arrays_size(), 0);  // every kept array dropped with its RemoteArray
}

TEST_F(ResidentClientTest, AChainOfKeptScansEqualsTheStreamedChain) {
  const std::vector<int64_t> x = Random<int64_t>(3 * kChunk / 8 + 5, 7);
  RemoteArray a = client_.Put(x);
  ScanOptions sum, max;
  max.op = v1::OPERATOR_MAX;
  RemoteArray b = client_.Scan(a, sum, {});
  RemoteArray c = client_.Scan(b, max, {});
  b.Drop();  // c no longer needs b
  RemoteArray d = client_.Scan(c, sum, {});
  const std::vector<int64_t> want = client_.Scan(client_.Scan(client_.Scan(x).values, max).values).values;
  EXPECT_TRUE(SameBits(d.Get<int64_t>(), want));
  EXPECT_EQ(client_.Reduce<int64_t>(d, v1::OPERATOR_MAX).value, client_.Reduce(want, v1::OPERATOR_MAX).value);
  EXPECT_EQ(client_.ListArrays().arrays_size(), 3);  // a, c, d
}

TEST_F(ResidentClientTest, TenantsSeeOnlyTheirOwnArrays) {
  Client alice(Options("alice")), bob(Options("bob"));
  const std::vector<float> x = Random<float>(5000, 3);
  RemoteArray mine = alice.Put(x, {std::chrono::milliseconds(0), "alice's"});
  EXPECT_TRUE(SameBits(mine.Get<float>(), x));
  EXPECT_EQ(CodeOf([&] { bob.GetArray(mine.id()); }), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(CodeOf([&] { client_.GetArray(mine.id()); }), grpc::StatusCode::NOT_FOUND);  // the default tenant
  EXPECT_EQ(CodeOf([&] { bob.DropArray(mine.id()); }), grpc::StatusCode::NOT_FOUND);
  v1::ReduceHeader r;
  r.set_dtype(v1::DTYPE_FLOAT32);
  r.set_op(v1::OPERATOR_SUM);
  r.mutable_resident()->set_values(mine.id());
  EXPECT_EQ(CodeOf([&] { bob.ReduceResident(r); }), grpc::StatusCode::NOT_FOUND);
  EXPECT_NO_THROW(alice.ReduceResident(r));
  const v1::ListArraysResponse a = alice.ListArrays(), b = bob.ListArrays();
  ASSERT_EQ(a.arrays_size(), 1);
  EXPECT_EQ(a.arrays(0).id(), mine.id());
  EXPECT_EQ(a.arrays(0).label(), "alice's");
  EXPECT_EQ(a.tenant_bytes(), 5000u * 4);
  EXPECT_EQ(b.arrays_size(), 0);
  EXPECT_EQ(b.tenant_bytes(), 0u);
  EXPECT_EQ(b.used_bytes(), 5000u * 4);  // every tenant's together
  // Bob's own array, and the same data: a different id, apart from Alice's.
  RemoteArray his = bob.Put(x);
  EXPECT_NE(his.id(), mine.id());
  EXPECT_EQ(alice.ListArrays().arrays_size(), 1);
  EXPECT_EQ(bob.ListArrays().arrays_size(), 1);
}

TEST_F(ResidentClientTest, ARemoteArrayDropsItsArrayUnlessReleased) {
  const std::vector<uint32_t> x = Random<uint32_t>(2000, 11);
  std::string id;
  {
    RemoteArray a = client_.Put(x);
    id = a.id();
    EXPECT_EQ(client_.ListArrays().arrays_size(), 1);
  }
  EXPECT_EQ(CodeOf([&] { client_.GetArray(id); }), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(client_.ListArrays().used_bytes(), 0u);

  // Moves carry ownership: the moved-from array drops nothing; assigning over drops the old one.
  RemoteArray a = client_.Put(x);
  RemoteArray b = std::move(a);
  EXPECT_FALSE(a);  // NOLINT(bugprone-use-after-move): empty by contract
  RemoteArray c = client_.Put(x);
  const std::string b_id = b.id(), c_id = c.id();
  c = std::move(b);  // c's old array is dropped
  EXPECT_EQ(CodeOf([&] { client_.GetArray(c_id); }), grpc::StatusCode::NOT_FOUND);
  EXPECT_TRUE(SameBits(c.Get<uint32_t>(), x));
  EXPECT_EQ(c.id(), b_id);

  // release(): the array stays, and is the caller's to drop by id.
  const v1::ArrayInfo info = c.release();
  EXPECT_FALSE(c);
  EXPECT_EQ(info.id(), b_id);
  EXPECT_EQ(client_.GetArray(b_id).size(), x.size() * 4);
  EXPECT_EQ(client_.DropArray(b_id).id(), b_id);
  EXPECT_EQ(CodeOf([&] { client_.DropArray(b_id); }), grpc::StatusCode::NOT_FOUND);
}

TEST_F(ResidentClientTest, DroppedArraysAreNotFound) {
  RemoteArray a = client_.Put(Random<double>(1000, 5));
  const std::string id = a.id();
  const v1::ArrayInfo last = a.Drop();
  EXPECT_EQ(last.id(), id);
  EXPECT_FALSE(a);
  EXPECT_THROW(a.Get(), std::logic_error);
  EXPECT_EQ(CodeOf([&] { client_.GetArray(id); }), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(CodeOf([&] { client_.DropArray(id); }), grpc::StatusCode::NOT_FOUND);
  v1::ScanHeader h;
  h.set_dtype(v1::DTYPE_FLOAT64);
  h.set_op(v1::OPERATOR_SUM);
  h.mutable_resident()->set_values(id);
  EXPECT_EQ(CodeOf([&] { client_.ScanResident(h); }), grpc::StatusCode::NOT_FOUND);
}

TEST_F(ResidentClientTest, MisuseIsRefusedBeforeOrByTheServer) {
  RemoteArray a = client_.Put(Random<int32_t>(100, 9));
  EXPECT_THROW(a.Get<float>(), std::invalid_argument);
  EXPECT_THROW(client_.Scan<int64_t>(a), std::invalid_argument);
  EXPECT_THROW(client_.Reduce<double>(a, v1::OPERATOR_SUM), std::invalid_argument);
  ScanOptions lanes;
  lanes.lanes = 2;
  EXPECT_THROW(client_.Scan<int32_t>(a, lanes), std::invalid_argument);
  EXPECT_THROW(client_.Put(v1::DTYPE_INT64, "abc", 3), std::invalid_argument);
  EXPECT_EQ(CodeOf([&] { a.Get(101); }), grpc::StatusCode::OUT_OF_RANGE);
  EXPECT_EQ(CodeOf([&] { a.Get(50, 51); }), grpc::StatusCode::OUT_OF_RANGE);
  EXPECT_TRUE(a.Get(100).empty());  // the empty range at the end
  EXPECT_THROW(ArrayIdFromHex("abc"), std::invalid_argument);
  EXPECT_THROW(ArrayIdFromHex(std::string(48, 'g')), std::invalid_argument);
}

TEST_F(ResidentClientTest, NarrowDtypesArePutAndGotAsTheyAre) {
  std::string bytes(3001 * 2, '\0');
  std::mt19937 rng(4);
  for (char& c : bytes) c = static_cast<char>(rng() | 1);
  RemoteArray a = client_.Put(v1::DTYPE_FLOAT16, bytes.data(), bytes.size());
  EXPECT_EQ(a.size(), 3001u);
  EXPECT_EQ(a.Get(), bytes);
}

TEST_F(ResidentClientTest, RefreshMovesTheExpiryAndClientLanesDoNotApply) {
  ClientOptions o = Options();
  o.lanes = 4;  // the Client's default for streamed calls; a resident call stays one call
  Client laned(o);
  const std::vector<int32_t> x = Random<int32_t>(70001, 2);
  RemoteArray a = laned.Put(x, {std::chrono::seconds(30), ""});
  const auto first = a.expires();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_GT(a.Refresh().expires_unix_ms(), 0u);
  EXPECT_GT(a.expires(), first);
  EXPECT_TRUE(SameBits(laned.Scan<int32_t>(a).values, client_.Scan(x).values));
}

TEST(ResidentClientLimits, AServerWithoutABudgetAnswersUnimplemented) {
  TestServer server;
  Client client(server.client_options());
  const std::vector<int32_t> x = Random<int32_t>(10, 1);
  EXPECT_EQ(CodeOf([&] { client.Put(x); }), grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_EQ(CodeOf([&] { client.ListArrays(); }), grpc::StatusCode::UNIMPLEMENTED);
}

}  // namespace
}  // namespace gpuscan::testing::resident_client
