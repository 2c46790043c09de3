// Shared memory (header.shared_memory) end to end: a client on the server's host puts its array
// in a region under the server's --shm-dir; the server reads it and writes results into the
// client's pages. Results are checked against the references and against the streamed path
// (same bits for floats), on random data, at sizes around the engines' sub-chunks; the region
// cache must never serve stale pages; a region that shrinks mid-call fails that call only.
// Field-by-field refusals are rows of the bad-input matrix (invalid_input_transport_rows.cc).
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "reference.h"
#include "test_server.h"

namespace gpuscan {
namespace {

using ::testing::HasSubstr;
using testing::TestServer;

class SharedMemoryTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    char pattern[] = "/tmp/gpuscan-shm-it-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = new std::string(pattern);
    server::ServerOptions o;
    o.shm_dir = *dir_;
    server_ = new TestServer(o);
  }
  static void TearDownTestSuite() {
    delete server_;
    rmdir(dir_->c_str());  // every region deleted itself
    delete dir_;
  }

  template <class T>
  static SharedRegion Fill(const std::vector<T>& x) {
    SharedRegion r = SharedRegion::Create(*dir_, x.size() * sizeof(T));
    if (!x.empty()) std::memcpy(r.data(), x.data(), x.size() * sizeof(T));
    return r;
  }
  template <class T>
  static std::vector<T> Read(const SharedRegion& r, size_t n) {
    std::vector<T> v(n);
    if (n) std::memcpy(v.data(), r.data(), n * sizeof(T));
    return v;
  }
  template <class T>
  static v1::ScanHeader ScanHeader(v1::Operator op, bool exclusive) {
    v1::ScanHeader h;
    h.set_dtype(DTypeOf<T>());
    h.set_op(op);
    h.set_kind(exclusive ? v1::SCAN_KIND_EXCLUSIVE : v1::SCAN_KIND_INCLUSIVE);
    return h;
  }

  static std::string* dir_;
  static TestServer* server_;
};
std::string* SharedMemoryTest::dir_ = nullptr;
TestServer* SharedMemoryTest::server_ = nullptr;

// Around the CUDA engine's 2 MiB sub-chunks and the lanes' two slots.
const std::vector<size_t> kSizes = {0, 1, 1000, (size_t{2} << 20) / 4 - 1, (size_t{2} << 20) / 4 + 1,
                                    (size_t{5} << 20) / 4 + 3};

TEST_F(SharedMemoryTest, ScanIntoAnotherRegionAndInPlace) {
  Client client(server_->client_options());
  GPUSCAN_SEEDED_RNG(rng);
  for (size_t n : kSizes) {
    for (bool exclusive : {false, true}) {
      SCOPED_TRACE("n=" + std::to_string(n) + (exclusive ? " exclusive" : " inclusive"));
      const auto x = testing::RandomInput<int32_t, ops::Sum<int32_t>>(n, rng);
      const auto ref = testing::ScanRef<int32_t, ops::Sum<int32_t>>(x, exclusive);
      SharedRegion in = Fill(x), out = SharedRegion::Create(*dir_, n * 4);
      const Timing t = client.ScanShared(ScanHeader<int32_t>(v1::OPERATOR_SUM, exclusive), in, n * 4, &out);
      EXPECT_EQ(Read<int32_t>(out, n), ref);
      EXPECT_EQ(Read<int32_t>(in, n), x);  // the input is left alone
      EXPECT_EQ(t.bytes_in, n * 4);
      client.ScanShared(ScanHeader<int32_t>(v1::OPERATOR_SUM, exclusive), in, n * 4);  // in place
      EXPECT_EQ(Read<int32_t>(in, n), ref);
    }
  }
}

TEST_F(SharedMemoryTest, EveryDTypeAndOperatorMatchesTheReference) {
  Client client(server_->client_options());
  GPUSCAN_SEEDED_RNG(rng);
  const size_t n = (size_t{3} << 20) / 8 + 7;
  auto check = [&](auto tag, v1::Operator op, auto op_tag) {
    using T = decltype(tag);
    using Op = decltype(op_tag);
    const auto x = testing::RandomInput<T, Op>(n, rng);
    SharedRegion in = Fill(x), out = SharedRegion::Create(*dir_, n * sizeof(T));
    client.ScanShared(ScanHeader<T>(op, false), in, n * sizeof(T), &out);
    testing::ExpectEqualValues(Read<T>(out, n), testing::ScanRef<T, Op>(x, false), "scan");
    v1::ReduceHeader rh;
    rh.set_dtype(DTypeOf<T>());
    rh.set_op(op);
    const v1::ReduceResponse r = client.ReduceShared(rh, in, n * sizeof(T));
    T got{};
    ASSERT_EQ(r.raw_value().size(), sizeof(T));
    std::memcpy(&got, r.raw_value().data(), sizeof(T));
    EXPECT_TRUE(testing::SameValue(got, (testing::ReduceRef<T, Op>(x)))) << "reduce";
    EXPECT_EQ(r.element_count(), n);
  };
  check(int32_t{}, v1::OPERATOR_MAX, ops::Max<int32_t>{});
  check(uint32_t{}, v1::OPERATOR_BIT_XOR, ops::BitXor<uint32_t>{});
  check(int64_t{}, v1::OPERATOR_SUM, ops::Sum<int64_t>{});
  check(uint64_t{}, v1::OPERATOR_MIN, ops::Min<uint64_t>{});
  check(double{}, v1::OPERATOR_MAX, ops::Max<double>{});
}

// Pieces of a client's arena (shared_arena.h): each call names its region at the piece's
// offset and says it is an arena's; every input and output is a fresh piece of one or two
// regions, reused as pieces go back, so a stale or misplaced offset would show.
TEST_F(SharedMemoryTest, ArenaPiecesAtTheirOffsets) {
  Client client(server_->client_options());
  GPUSCAN_SEEDED_RNG(rng);
  SharedArena arena(*dir_);
  v1::ReduceHeader rh;
  rh.set_dtype(v1::DTYPE_INT64);
  rh.set_op(v1::OPERATOR_MIN);
  size_t regions = 0;
  for (int round = 0; round < 2; ++round) {
    if (round == 1) regions = arena.regions().size();
    for (size_t n : kSizes) {
      SCOPED_TRACE("round " + std::to_string(round) + " n=" + std::to_string(n));
      const auto x = testing::RandomCompactInput<int64_t>(n, rng);
      const auto flags = testing::RandomFlags(n, rng, 0.3);
      SharedPiece in = arena.Carve<int64_t>(n), f = arena.Carve(n), out = arena.Carve<int64_t>(n, false),
                  indices = arena.Carve<int64_t>(n, false);
      if (n) std::memcpy(in.data(), x.data(), n * 8);
      if (n) std::memcpy(f.data(), flags.data(), n);

      client.ScanShared(ScanHeader<int64_t>(v1::OPERATOR_SUM, true), in.span(), &out.span());
      const auto scanned = testing::ScanRef<int64_t, ops::Sum<int64_t>>(x, true);
      EXPECT_TRUE(std::equal(scanned.begin(), scanned.end(), out.as<int64_t>()));

      const v1::ReduceResponse r = client.ReduceShared(rh, in.span());
      int64_t got = 0;
      std::memcpy(&got, r.raw_value().data(), 8);
      EXPECT_EQ(got, (testing::ReduceRef<int64_t, ops::Min<int64_t>>(x)));

      v1::CompactHeader ch;
      ch.set_dtype(v1::DTYPE_INT64);
      ch.set_use_flags(true);
      ch.set_output(v1::COMPACT_OUTPUT_VALUES_AND_INDICES);
      const v1::CompactResponse c = client.CompactShared(ch, in.span(), &f.span(), &out.span(), &indices.span());
      const auto ref = testing::CompactRef(x, flags);
      ASSERT_EQ(c.kept_count(), ref.values.size());
      EXPECT_TRUE(std::equal(ref.values.begin(), ref.values.end(), out.as<int64_t>()));
      EXPECT_TRUE(std::equal(ref.indices.begin(), ref.indices.end(), indices.as<int64_t>()));

      client.ScanShared(ScanHeader<int64_t>(v1::OPERATOR_SUM, true), in.span());  // in place
      EXPECT_TRUE(std::equal(scanned.begin(), scanned.end(), in.as<int64_t>()));
    }
  }
  EXPECT_EQ(arena.regions().size(), regions) << "the second round should reuse the first's pieces";
}

// Float sums are deterministic: the region path gives the streamed path's bits.
TEST_F(SharedMemoryTest, FloatSumsHaveTheStreamedBits) {
  Client client(server_->client_options(1 << 16));
  GPUSCAN_SEEDED_RNG(rng);
  const size_t n = (size_t{5} << 20) / 4 + 3;
  const auto x = testing::RandomInput<float, ops::Sum<float>>(n, rng);
  ScanOptions o;
  const auto streamed = client.Scan(x, o).values;
  SharedRegion in = Fill(x);
  client.ScanShared(ScanHeader<float>(v1::OPERATOR_SUM, false), in, n * 4);
  testing::ExpectSameBits(Read<float>(in, n), streamed, "float32 sum scan, region vs stream");
  v1::ReduceHeader rh;
  rh.set_dtype(v1::DTYPE_FLOAT32);
  rh.set_op(v1::OPERATOR_SUM);
  SharedRegion again = Fill(x);
  float value = 0;
  std::memcpy(&value, client.ReduceShared(rh, again, n * 4).raw_value().data(), 4);
  EXPECT_TRUE(testing::SameBits(value, streamed.back()));  // a reduce is the scan's last element
}

TEST_F(SharedMemoryTest, CompactWithFlagsAndPredicateIntoRegions) {
  Client client(server_->client_options());
  GPUSCAN_SEEDED_RNG(rng);
  for (size_t n : kSizes) {
    SCOPED_TRACE("n=" + std::to_string(n));
    const auto x = testing::RandomCompactInput<int64_t>(n, rng);
    const auto flags = testing::RandomFlags(n, rng, 0.4);
    SharedRegion in = Fill(x), f = Fill(flags), values = SharedRegion::Create(*dir_, n * 8),
                 indices = SharedRegion::Create(*dir_, n * 8);
    v1::CompactHeader h;
    h.set_dtype(v1::DTYPE_INT64);
    h.set_use_flags(true);
    h.set_output(v1::COMPACT_OUTPUT_VALUES_AND_INDICES);
    v1::CompactResponse r = client.CompactShared(h, in, n * 8, &f, &values, &indices);
    auto ref = testing::CompactRef(x, flags);
    ASSERT_EQ(r.kept_count(), ref.values.size());
    EXPECT_EQ(r.element_count(), n);
    EXPECT_EQ(Read<int64_t>(values, r.kept_count()), ref.values);
    EXPECT_EQ(Read<int64_t>(indices, r.kept_count()), ref.indices);

    h.mutable_predicate()->set_op(v1::PREDICATE_OP_GT);
    h.mutable_predicate()->mutable_threshold()->set_int_value(0);
    h.set_output(v1::COMPACT_OUTPUT_INDICES);
    r = client.CompactShared(h, in, n * 8, nullptr, nullptr, &indices);
    ref = testing::CompactRef(x, engine::PredicateOp::kGt, int64_t{0}, int64_t{0});
    ASSERT_EQ(r.kept_count(), ref.indices.size());
    EXPECT_EQ(Read<int64_t>(indices, r.kept_count()), ref.indices);
  }
}

// Regions used again are registered for DMA, and the CUDA engine then copies through its
// ring of four 2 MiB buffers on three queues (RunDirect) instead of the two staged slots: sizes
// around the ring's wrap, scans out of place and in place, reductions, each call on fresh data
// in the same regions; on the cuda engine also past the service's 256 MiB pieces.
TEST_F(SharedMemoryTest, RegisteredRegionsAtTheRingsBoundaries) {
  Client client(server_->client_options());
  GPUSCAN_SEEDED_RNG(rng);
  const size_t sub = (size_t{2} << 20) / 4;  // int32 elements of one 2 MiB buffer
  std::vector<size_t> sizes = {sub + 1, 4 * sub - 1, 4 * sub, 4 * sub + 1, 9 * sub + 3};
  if (server_->server().engine().name() == "cuda") sizes.push_back((size_t{257} << 20) / 4 + 5);
  const size_t most = sizes.back();
  SharedRegion in = SharedRegion::Create(*dir_, most * 4), out = SharedRegion::Create(*dir_, most * 4);
  v1::ReduceHeader rh;
  rh.set_dtype(v1::DTYPE_INT32);
  rh.set_op(v1::OPERATOR_MAX);
  for (int round = 0; round < 2; ++round) {  // the first use of each region is staged
    for (size_t n : sizes) {
      for (bool exclusive : {false, true}) {
        SCOPED_TRACE("round " + std::to_string(round) + " n=" + std::to_string(n) + (exclusive ? " exclusive" : ""));
        const auto x = testing::RandomInput<int32_t, ops::Sum<int32_t>>(n, rng);
        const auto ref = testing::ScanRef<int32_t, ops::Sum<int32_t>>(x, exclusive);
        std::memcpy(in.data(), x.data(), n * 4);
        client.ScanShared(ScanHeader<int32_t>(v1::OPERATOR_SUM, exclusive), in, n * 4, &out);
        ASSERT_EQ(Read<int32_t>(out, n), ref);
        const v1::ReduceResponse r = client.ReduceShared(rh, in, n * 4);
        int32_t got = 0;
        std::memcpy(&got, r.raw_value().data(), 4);
        EXPECT_EQ(got, (testing::ReduceRef<int32_t, ops::Max<int32_t>>(x)));
        client.ScanShared(ScanHeader<int32_t>(v1::OPERATOR_SUM, exclusive), in, n * 4);  // in place
        ASSERT_EQ(Read<int32_t>(in, n), ref);
      }
    }
  }
}

// The server keeps a region's mapping (and DMA registration) between calls: new contents, a
// new file under the same name and a resized file must all be seen afresh.
TEST_F(SharedMemoryTest, CachedRegionsNeverServeStalePages) {
  Client client(server_->client_options());
  GPUSCAN_SEEDED_RNG(rng);
  const size_t n = (size_t{3} << 20) / 4;
  auto header = ScanHeader<int32_t>(v1::OPERATOR_SUM, false);
  SharedRegion in = SharedRegion::Create(*dir_, n * 4), out = SharedRegion::Create(*dir_, n * 4);
  for (int round = 0; round < 3; ++round) {
    const auto x = testing::RandomInput<int32_t, ops::Sum<int32_t>>(n, rng);
    std::memcpy(in.data(), x.data(), n * 4);  // new contents through the client's mapping
    client.ScanShared(header, in, n * 4, &out);
    ASSERT_EQ(Read<int32_t>(out, n), (testing::ScanRef<int32_t, ops::Sum<int32_t>>(x, false))) << "round " << round;
  }
  // Shrunk to nothing and grown back between calls (pages detached from any old mapping).
  ASSERT_EQ(truncate(out.path().c_str(), 0), 0);
  ASSERT_EQ(truncate(out.path().c_str(), static_cast<off_t>(n * 4)), 0);
  const auto x = testing::RandomInput<int32_t, ops::Sum<int32_t>>(n, rng);
  std::memcpy(in.data(), x.data(), n * 4);
  client.ScanShared(header, in, n * 4, &out);
  EXPECT_EQ(Read<int32_t>(out, n), (testing::ScanRef<int32_t, ops::Sum<int32_t>>(x, false)));
}

// A client truncating its region mid-call: that call fails with a status naming the region (or
// finished first), the server keeps serving, and the next call on a good region is right.
TEST_F(SharedMemoryTest, RegionShrinkingDuringTheCallFailsOnlyThatCall) {
  Client client(server_->client_options());
  GPUSCAN_SEEDED_RNG(rng);
  const size_t n = size_t{48} << 20;  // int32: 192 MiB, long enough to truncate under
  int caught = 0;
  for (int attempt = 0; attempt < 8 && caught == 0; ++attempt) {
    SharedRegion in = SharedRegion::Create(*dir_, n * 4);
    std::fill_n(in.as<int32_t>(), n, 3);
    std::atomic<bool> started{false};
    std::thread truncator([&] {
      while (!started) std::this_thread::yield();
      std::this_thread::sleep_for(std::chrono::milliseconds(5 + 10 * attempt));
      ASSERT_EQ(truncate(in.path().c_str(), 4096), 0);
    });
    started = true;
    try {
      client.ScanShared(ScanHeader<int32_t>(v1::OPERATOR_SUM, false), in, n * 4);
    } catch (const RpcError& e) {
      EXPECT_THAT(e.what(), HasSubstr("header.shared_memory.region \"" + in.name() + "\""));
      if (e.code() == grpc::StatusCode::OUT_OF_RANGE) {  // truncated before the call opened it
        EXPECT_THAT(e.what(), HasSubstr("fewer than"));
      } else {
        EXPECT_EQ(e.code(), grpc::StatusCode::FAILED_PRECONDITION) << e.what();
        EXPECT_THAT(e.what(), HasSubstr("shrank"));
        ++caught;
      }
    }
    truncator.join();
  }
  EXPECT_GT(caught, 0) << "no truncation landed inside a call";
  EXPECT_EQ(client.Health(), "SERVING");
  const auto x = testing::RandomInput<int32_t, ops::Sum<int32_t>>(1000, rng);
  SharedRegion good = Fill(x);
  client.ScanShared(ScanHeader<int32_t>(v1::OPERATOR_SUM, false), good, x.size() * 4);
  EXPECT_EQ(Read<int32_t>(good, x.size()), (testing::ScanRef<int32_t, ops::Sum<int32_t>>(x, false)));
}

TEST_F(SharedMemoryTest, OffWithoutShmDirAndSaidSoInInfo) {
  Client client(server_->client_options());
  EXPECT_TRUE(client.Info().limits().shared_memory());
  EXPECT_EQ(client.Info().limits().shm_dir(), *dir_);
  TestServer off;
  Client off_client(off.client_options());
  EXPECT_FALSE(off_client.Info().limits().shared_memory());
  SharedRegion in = SharedRegion::Create(*dir_, 64);
  try {
    off_client.ScanShared(ScanHeader<int32_t>(v1::OPERATOR_SUM, false), in, 64);
    FAIL() << "a server without --shm-dir accepted a shared-memory call";
  } catch (const RpcError& e) {
    EXPECT_EQ(e.code(), grpc::StatusCode::FAILED_PRECONDITION);
    EXPECT_THAT(e.what(), HasSubstr("--shm-dir"));
  }
}

}  // namespace
}  // namespace gpuscan
