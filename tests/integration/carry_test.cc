// ScanHeader.carry against an in-process server (CPU engine here; GPUSCAN_TEST_ENGINE=cuda on a
// GPU): every result is op(carry, the array's own scan), an exclusive scan's first one the carry,
// bit for bit with the plain scan folded on the host, on random data (never zeros) of every 4- and
// 8-byte dtype and operator, at sizes around the chunk boundaries; the same bits streamed, resident
// (read back and kept), in a pipeline stage and in shared memory... where each is served.
#include <algorithm>
#include <cstring>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include <gtest/gtest.h>

#include "gpuscan/kernels/operators.h"
#include "gpuscan/pipeline.h"
#include "gpuscan/resident_ops.h"
#include "reference.h"  // RandomInput, SameBits
#include "resident_fixture.h"
#include "test_server.h"

namespace gpuscan::testing::carry_tests {
namespace {

constexpr size_t kChunk = resident::kChunk;  // the server's and the client's chunk: arrays cross many

// The plain scan with the carry folded in on the host, as the server defines it.
template <class T, class Op>
std::vector<T> Folded(std::vector<T> scan, T carry, bool exclusive) {
  const Op op;
  for (T& y : scan) y = op(carry, y);
  if (exclusive && !scan.empty()) scan[0] = carry;
  return scan;
}

template <class T>
std::vector<v1::Operator> Operators() {
  std::vector<v1::Operator> ops{v1::OPERATOR_SUM, v1::OPERATOR_PRODUCT, v1::OPERATOR_MIN, v1::OPERATOR_MAX};
  if constexpr (std::is_integral_v<T>) {
    ops.insert(ops.end(), {v1::OPERATOR_BIT_AND, v1::OPERATOR_BIT_OR, v1::OPERATOR_BIT_XOR});
  }
  return ops;
}

template <class T, class F>
void WithOp(v1::Operator op, F&& f) {
  switch (op) {
    case v1::OPERATOR_SUM: return f(ops::Sum<T>{});
    case v1::OPERATOR_PRODUCT: return f(ops::Product<T>{});
    case v1::OPERATOR_MIN: return f(ops::Min<T>{});
    case v1::OPERATOR_MAX: return f(ops::Max<T>{});
    default: break;
  }
  if constexpr (std::is_integral_v<T>) {
    if (op == v1::OPERATOR_BIT_AND) return f(ops::BitAnd<T>{});
    if (op == v1::OPERATOR_BIT_OR) return f(ops::BitOr<T>{});
    if (op == v1::OPERATOR_BIT_XOR) return f(ops::BitXor<T>{});
  }
  FAIL() << "operator " << op;
}

class CarryTest : public ::testing::Test {
 protected:
  TestServer server_{resident::ResidentOptions()};
  Client client_{server_.client_options(kChunk)};
};

template <class T>
class CarryTyped : public CarryTest {};
using ElementTypes = ::testing::Types<int32_t, int64_t, uint32_t, uint64_t, float, double>;
TYPED_TEST_SUITE(CarryTyped, ElementTypes);

// Streamed, resident read back and resident kept: the plain scan folded, bit for bit.
TYPED_TEST(CarryTyped, EveryResultIsTheCarryFoldedIntoTheScan) {
  using T = TypeParam;
  Client& c = this->client_;
  const size_t per = kChunk / sizeof(T);
  uint32_t seed = 70;
  for (const v1::Operator op : Operators<T>()) {
    for (const bool exclusive : {false, true}) {
      for (const size_t n : {size_t{1}, per - 1, per, per + 1, 3 * per + 7}) {
        SCOPED_TRACE("op=" + v1::Operator_Name(op) + (exclusive ? " exclusive" : " inclusive") +
                     " n=" + std::to_string(n));
        // The operator's own random data (reference.h: a running AND or OR keeps bits to the end,
        // so a carry folded wrongly shows), and a carry drawn the same way.
        std::mt19937_64 rng(seed++);
        std::vector<T> x, want;
        T carry{};
        ScanOptions plain;
        plain.op = op;
        plain.exclusive = exclusive;
        WithOp<T>(op, [&](auto o) {
          x = RandomInput<T, decltype(o)>(n, rng);
          carry = RandomInput<T, decltype(o)>(1, rng)[0];
          want = Folded<T, decltype(o)>(c.Scan(x, plain).values, carry, exclusive);
        });
        ScanOptions carried = plain;
        carried.carry = CarryOf(carry);
        EXPECT_TRUE(SameBits(c.Scan(x, carried).values, want)) << "streamed";

        RemoteArray a = c.Put(x);
        EXPECT_TRUE(SameBits(c.template Scan<T>(a, carried).values, want)) << "resident";
        RemoteArray kept = c.Scan(a, carried, ::gpuscan::ResidentOptions{});
        EXPECT_TRUE(SameBits(kept.template Get<T>(), want)) << "resident, kept";

        Pipeline p = c.NewPipeline();
        const Stage s = p.Scan(a, carried, Return::kData);
        PipelineResult r = p.Run();
        EXPECT_TRUE(SameBits(r.Data<T>(s), want)) << "pipeline stage";
      }
    }
  }
}

// An exclusive float sum's first result is the carry's own bits, -0.0 included (op(-0.0, identity)
// would be +0.0); infinities and NaN fold as the operator says.
TEST_F(CarryTest, FloatEdgesFoldAsTheOperatorSays) {
  std::mt19937_64 rng(5);
  const std::vector<double> x = RandomInput<double, ops::Sum<double>>(3 * kChunk / 8 + 3, rng);
  for (const double carry : {-0.0, std::numeric_limits<double>::infinity(), std::numeric_limits<double>::quiet_NaN()}) {
    ScanOptions o;
    o.exclusive = true;
    o.carry = CarryOf(carry);
    const std::vector<double> got = client_.Scan(x, o).values;
    ASSERT_EQ(got.size(), x.size());
    EXPECT_TRUE(SameBits(got[0], carry));
    ScanOptions plain;
    plain.exclusive = true;
    EXPECT_TRUE(SameBits(got, Folded<double, ops::Sum<double>>(client_.Scan(x, plain).values, carry, true)));
  }
}

// A narrow input's carry is one element of its output dtype, folded into the wide results.
TEST_F(CarryTest, NarrowInputFoldsIntoItsOutputDType) {
  std::mt19937 rng(9);
  std::string x(2 * kChunk + 5, '\0');
  for (char& b : x) b = static_cast<char>(rng() | 1);
  v1::ScanHeader h;
  h.set_dtype(v1::DTYPE_INT8);
  h.set_op(v1::OPERATOR_SUM);
  h.set_element_count(x.size());
  const int64_t carry = -123456789012;
  std::vector<int64_t> want(x.size());
  int64_t running = 0;
  for (size_t i = 0; i < x.size(); ++i) want[i] = carry + (running += static_cast<int8_t>(x[i]));
  h.set_carry(CarryOf(carry));
  size_t at = 0;
  std::string out;
  client_.ScanStream(
      h,
      [&](void* buf, size_t max) {
        const size_t n = std::min(max, x.size() - at);
        std::memcpy(buf, x.data() + at, n);
        at += n;
        return n;
      },
      [&](const void* data, size_t bytes) { out.append(static_cast<const char*>(data), bytes); }, {}, 1);
  std::vector<int64_t> got(out.size() / sizeof(int64_t));
  std::memcpy(got.data(), out.data(), got.size() * sizeof(int64_t));
  EXPECT_TRUE(SameBits(got, want));
}

// Lanes or shards asked of a carried scan: refused before any call; the client's own lanes are
// not used for it (one stream).
TEST_F(CarryTest, OneStreamOnly) {
  std::mt19937_64 rng(3);
  const std::vector<int32_t> x = RandomInput<int32_t, ops::Sum<int32_t>>(10 * kChunk, rng);
  ScanOptions o;
  o.carry = CarryOf<int32_t>(7);
  o.lanes = 4;
  EXPECT_THROW(client_.Scan(x, o), std::invalid_argument);
  o.lanes = 0;
  o.shards = 2;
  EXPECT_THROW(client_.Scan(x, o), std::invalid_argument);
  ClientOptions laned = server_.client_options(kChunk);
  laned.lanes = 4;
  Client striped(laned);
  o.shards = 0;
  std::vector<int32_t> want = striped.Scan(x).values;
  for (int32_t& y : want) y = static_cast<int32_t>(static_cast<uint32_t>(y) + 7u);
  EXPECT_TRUE(SameBits(striped.Scan(x, o).values, want));
}

}  // namespace
}  // namespace gpuscan::testing::carry_tests
