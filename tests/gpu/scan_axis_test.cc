// Axis scans (issue 47): ScanRows (numpy's cumsum(m, axis=1)) and ScanColumns (axis=0) against
// the plain sequential double loop, bit for bit (floats included: the kernels fold every row and
// column strictly in order). Every dtype, every operator for int32 and a few for the others,
// inclusive and exclusive, in place, unaligned pointers (one element off), empty matrices, sizes
// around every tile edge (the row kernel's 32-row x 256-byte tiles, the column kernels' 64-,
// 128- and 256-row bands of 256-byte strips), shapes that take each column walk (strips, tall
// strips for float SUM/PRODUCT, look-back for the rest when the strips are fewer than the SMs),
// and column scans cut into bands at random, chained by their carries, against one pass.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gpu_test_util.h"
#include "gpuscan/kernels/scan_axis.h"

namespace gpuscan::gputest {
namespace {

using testing::RandomInput;

struct Dims {
  uint64_t rows, cols;
};

// Shapes around the tiles' edges (4-byte types: 64 columns a tile row, 8-byte: 32), and a few
// that take each column walk on a 132-SM H100: 8500 columns of 4 bytes are 133 strips (the
// strip walk), fewer are the look-back (or tall strips for float SUM/PRODUCT).
std::vector<Dims> EdgeShapes() {
  return {{0, 0},    {0, 7},     {7, 0},     {1, 1},     {1, 2},     {2, 1},     {1, 300},   {300, 1},
          {2, 2},    {31, 63},   {32, 64},   {33, 65},   {31, 33},   {33, 31},   {63, 64},   {64, 63},
          {65, 129}, {127, 128}, {128, 127}, {129, 129}, {255, 65},  {256, 64},  {257, 63},  {1000, 3},
          {3, 1000}, {513, 40},  {130, 1030}, {600, 257}, {70, 5000}, {4100, 256}, {2000, 97}};
}

template <class T>
bool SameBits(T a, T b) {
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

template <class T>
::testing::AssertionResult BitEqual(const std::vector<T>& got, const std::vector<T>& want, uint64_t cols) {
  for (std::size_t i = 0; i < want.size(); ++i) {
    if (!SameBits(got[i], want[i])) {
      return ::testing::AssertionFailure() << "first difference at [" << i / std::max<uint64_t>(cols, 1) << "]["
                                           << i % std::max<uint64_t>(cols, 1) << "]: got " << +got[i] << ", want "
                                           << +want[i];
    }
  }
  return ::testing::AssertionSuccess();
}

// The references: acc = first element (or carry op first), then acc = op(acc, x) in order;
// exclusive writes acc before x goes in (identity first when there is no carry).
template <class T, class Op>
std::vector<T> RowsRef(const std::vector<T>& in, uint64_t rows, uint64_t cols, bool exclusive) {
  const Op op;
  std::vector<T> out(in.size());
  for (uint64_t i = 0; i < rows; ++i) {
    T acc{};
    for (uint64_t j = 0; j < cols; ++j) {
      const T x = in[i * cols + j];
      T& o = out[i * cols + j];
      if (j == 0) {
        acc = x;
        o = exclusive ? Op::identity() : x;
      } else if (exclusive) {
        o = acc;
        acc = op(acc, x);
      } else {
        o = acc = op(acc, x);
      }
    }
  }
  return out;
}

template <class T, class Op>
std::vector<T> ColumnsRef(const std::vector<T>& in, uint64_t rows, uint64_t cols, bool exclusive,
                          const std::vector<T>* carry, std::vector<T>* carry_out) {
  const Op op;
  std::vector<T> out(in.size());
  if (carry_out) carry_out->assign(cols, Op::identity());
  for (uint64_t j = 0; j < cols; ++j) {
    bool have = carry != nullptr;
    T acc = have ? (*carry)[j] : T{};
    for (uint64_t i = 0; i < rows; ++i) {
      const T x = in[i * cols + j];
      T& o = out[i * cols + j];
      if (!have) {
        acc = x;
        o = exclusive ? Op::identity() : x;
        have = true;
      } else if (exclusive) {
        o = acc;
        acc = op(acc, x);
      } else {
        o = acc = op(acc, x);
      }
    }
    if (carry_out && have) (*carry_out)[j] = acc;
  }
  return out;
}

struct Case {
  bool exclusive, in_place, unaligned;
};

std::string Describe(const char* what, const char* dtype, const char* op, Dims d, Case c) {
  return std::string(what) + " " + dtype + " " + op + " " + std::to_string(d.rows) + "x" + std::to_string(d.cols) +
         (c.exclusive ? " exclusive" : " inclusive") + (c.in_place ? " in place" : "") +
         (c.unaligned ? " unaligned" : "");
}

template <class T, class Op>
void CheckRows(Dims d, Case c, std::mt19937_64& rng, TempBuffer& temp) {
  SCOPED_TRACE(Describe("ScanRows", DtypeName<T>(), Op::kName, d, c));
  const uint64_t n = d.rows * d.cols, off = c.unaligned ? 1 : 0;
  const std::vector<T> in = RandomInput<T, Op>(n, rng);
  DeviceBuffer<T> a(n + off), b(n + off);
  ASSERT_TRUE(a.ok() && b.ok());
  a.Upload(in, off);
  T* src = a.get() + off;
  T* dst = c.in_place ? src : b.get() + off;
  std::size_t bytes = 0;
  CUDA_OK((kernels::ScanRows<T, Op>(nullptr, bytes, src, dst, d.rows, d.cols, c.exclusive, nullptr)));
  ASSERT_GT(bytes, 0u);
  void* t = temp.Reserve(bytes);
  ASSERT_NE(t, nullptr);
  CUDA_OK((kernels::ScanRows<T, Op>(t, bytes, src, dst, d.rows, d.cols, c.exclusive, nullptr)));
  CUDA_OK(cudaDeviceSynchronize());
  const std::vector<T> got = (c.in_place ? a : b).Download(n, off);
  EXPECT_TRUE(BitEqual(got, RowsRef<T, Op>(in, d.rows, d.cols, c.exclusive), d.cols));
  EXPECT_TRUE((c.in_place ? a : b).GuardIntact());
  if (!c.in_place && n > 0) EXPECT_TRUE(BitEqual(a.Download(n, off), in, d.cols)) << "the input changed";
}

// One ScanColumns call over the matrix cut into bands at `cuts` (row indices, ascending),
// chained by a device carry (the carry-out buffer is the next band's carry-in: aliasing), the
// first band starting from `carry0` (or none), against the one-pass reference.
template <class T, class Op>
void CheckColumns(Dims d, Case c, const std::vector<uint64_t>& cuts, bool with_carry, std::mt19937_64& rng,
                  TempBuffer& temp) {
  SCOPED_TRACE(Describe("ScanColumns", DtypeName<T>(), Op::kName, d, c) + ", " + std::to_string(cuts.size() + 1) +
               " bands" + (with_carry ? ", a carry in" : ""));
  const uint64_t n = d.rows * d.cols, off = c.unaligned ? 1 : 0;
  const std::vector<T> in = RandomInput<T, Op>(n, rng);
  const std::vector<T> carry0 = RandomInput<T, Op>(d.cols, rng);
  DeviceBuffer<T> a(n + off), b(n + off), carry(d.cols + off);
  ASSERT_TRUE(a.ok() && b.ok() && carry.ok());
  a.Upload(in, off);
  if (with_carry) carry.Upload(carry0, off);
  T* src = a.get() + off;
  T* dst = c.in_place ? src : b.get() + off;
  T* dcarry = carry.get() + off;
  std::vector<uint64_t> bounds{0};
  bounds.insert(bounds.end(), cuts.begin(), cuts.end());
  bounds.push_back(d.rows);
  for (std::size_t k = 0; k + 1 < bounds.size(); ++k) {
    const uint64_t r0 = bounds[k], r1 = bounds[k + 1];
    const T* cin = (k == 0 && !with_carry) ? nullptr : dcarry;
    std::size_t bytes = 0;
    CUDA_OK((kernels::ScanColumns<T, Op>(nullptr, bytes, src + r0 * d.cols, dst + r0 * d.cols, r1 - r0, d.cols,
                                         c.exclusive, cin, dcarry, nullptr)));
    ASSERT_GT(bytes, 0u);
    void* t = temp.Reserve(bytes);
    ASSERT_NE(t, nullptr);
    CUDA_OK((kernels::ScanColumns<T, Op>(t, bytes, src + r0 * d.cols, dst + r0 * d.cols, r1 - r0, d.cols,
                                         c.exclusive, cin, dcarry, nullptr)));
  }
  CUDA_OK(cudaDeviceSynchronize());
  std::vector<T> want_carry;
  const std::vector<T> want =
      ColumnsRef<T, Op>(in, d.rows, d.cols, c.exclusive, with_carry ? &carry0 : nullptr, &want_carry);
  EXPECT_TRUE(BitEqual((c.in_place ? a : b).Download(n, off), want, d.cols));
  EXPECT_TRUE(BitEqual(carry.Download(d.cols, off), want_carry, d.cols)) << "the carry out";
  EXPECT_TRUE((c.in_place ? a : b).GuardIntact());
  EXPECT_TRUE(carry.GuardIntact());
}

std::vector<uint64_t> RandomCuts(uint64_t rows, int count, std::mt19937_64& rng) {
  std::vector<uint64_t> cuts;
  for (int i = 0; i < count && rows > 0; ++i) cuts.push_back(std::uniform_int_distribution<uint64_t>(0, rows)(rng));
  std::sort(cuts.begin(), cuts.end());
  return cuts;
}

// Every edge shape, inclusive and exclusive, with in place and unaligned pointers in turn; the
// column scans once in one call and once in random bands with a carry in.
template <class T, class Op>
void Sweep(std::mt19937_64& rng) {
  TempBuffer temp;
  int i = 0;
  for (const Dims d : EdgeShapes()) {
    for (bool exclusive : {false, true}) {
      const Case c{exclusive, (i % 3) == 1, (i % 4) == 2};
      ++i;
      CheckRows<T, Op>(d, c, rng, temp);
      CheckColumns<T, Op>(d, c, {}, false, rng, temp);
      CheckColumns<T, Op>(d, c, RandomCuts(d.rows, 3, rng), true, rng, temp);
      if (::testing::Test::HasFailure()) return;
    }
  }
}

class ScanAxisTest : public GpuTest {};

TEST_F(ScanAxisTest, Int32EveryOperator) {
  GPUSCAN_SEEDED_RNG(rng);
  ForEachOp<int32_t>([&](auto op) { Sweep<int32_t, decltype(op)>(rng); });
}

TEST_F(ScanAxisTest, Uint32) {
  GPUSCAN_SEEDED_RNG(rng);
  Sweep<uint32_t, ops::Sum<uint32_t>>(rng);
  Sweep<uint32_t, ops::Max<uint32_t>>(rng);
  Sweep<uint32_t, ops::BitOr<uint32_t>>(rng);
}

TEST_F(ScanAxisTest, Int64) {
  GPUSCAN_SEEDED_RNG(rng);
  Sweep<int64_t, ops::Sum<int64_t>>(rng);
  Sweep<int64_t, ops::Min<int64_t>>(rng);
  Sweep<int64_t, ops::BitAnd<int64_t>>(rng);
}

TEST_F(ScanAxisTest, Uint64) {
  GPUSCAN_SEEDED_RNG(rng);
  Sweep<uint64_t, ops::Product<uint64_t>>(rng);
  Sweep<uint64_t, ops::BitXor<uint64_t>>(rng);
}

TEST_F(ScanAxisTest, FloatBitExact) {
  GPUSCAN_SEEDED_RNG(rng);
  Sweep<float, ops::Sum<float>>(rng);
  Sweep<float, ops::Product<float>>(rng);
  Sweep<float, ops::Min<float>>(rng);
  Sweep<float, ops::Max<float>>(rng);
}

TEST_F(ScanAxisTest, DoubleBitExact) {
  GPUSCAN_SEEDED_RNG(rng);
  Sweep<double, ops::Sum<double>>(rng);
  Sweep<double, ops::Product<double>>(rng);
  Sweep<double, ops::Max<double>>(rng);
}

// Larger matrices: the look-back with thousands of bands in flight (few columns), the strip
// walk over more strips than SMs, float SUM's tall strips; in random bands.
TEST_F(ScanAxisTest, LargeShapes) {
  GPUSCAN_SEEDED_RNG(rng);
  TempBuffer temp;
  const Case inc{false, false, false}, exc{true, false, false};
  for (const Dims d : {Dims{65536, 256}, Dims{20000, 100}, Dims{300, 16384}}) {
    CheckColumns<int32_t, ops::Sum<int32_t>>(d, inc, {}, false, rng, temp);
    CheckColumns<int32_t, ops::BitXor<int32_t>>(d, exc, RandomCuts(d.rows, 2, rng), true, rng, temp);
    CheckColumns<float, ops::Sum<float>>(d, inc, {}, false, rng, temp);
    CheckColumns<float, ops::Max<float>>(d, exc, {}, false, rng, temp);
    CheckColumns<double, ops::Sum<double>>(d, exc, RandomCuts(d.rows, 2, rng), true, rng, temp);
    CheckRows<int32_t, ops::Sum<int32_t>>(d, inc, rng, temp);
    CheckRows<float, ops::Sum<float>>(d, exc, rng, temp);
    CheckRows<int64_t, ops::Max<int64_t>>(d, inc, rng, temp);
  }
}

// The look-back walk's own edges: bands of 32 rows x 256 columns (4-byte types; 16 rows for
// 8-byte ones) or, for fewer columns, 32..128 columns with 2..8 row groups a band; column tiles
// cut short (257, 300, 1000 columns), one-column matrices, bands cut short, thousands of bands
// (long walks over aggregates), every exact dtype, MIN/MAX, exclusive, in place, carries in and
// out through random cuts.
TEST_F(ScanAxisTest, LookBackEdges) {
  GPUSCAN_SEEDED_RNG(rng);
  TempBuffer temp;
  int i = 0;
  for (const Dims d : {Dims{100001, 1}, Dims{40000, 3}, Dims{9999, 33}, Dims{4097, 65}, Dims{3001, 129},
                       Dims{2049, 257}, Dims{1025, 300}, Dims{777, 1000}, Dims{131072, 256}}) {
    const Case c{i % 2 == 1, i % 3 == 0, false};
    ++i;
    CheckColumns<int32_t, ops::Sum<int32_t>>(d, c, RandomCuts(d.rows, 2, rng), true, rng, temp);
    CheckColumns<uint32_t, ops::Max<uint32_t>>(d, c, {}, false, rng, temp);
    CheckColumns<int64_t, ops::Sum<int64_t>>(d, c, {}, true, rng, temp);
    CheckColumns<uint64_t, ops::BitXor<uint64_t>>(d, c, RandomCuts(d.rows, 1, rng), false, rng, temp);
    CheckColumns<float, ops::Min<float>>(d, c, RandomCuts(d.rows, 2, rng), true, rng, temp);
    CheckColumns<double, ops::Max<double>>(d, c, {}, false, rng, temp);
    CheckColumns<int32_t, ops::Product<int32_t>>(d, Case{!c.exclusive, !c.in_place, false}, {}, false, rng, temp);
    if (::testing::Test::HasFailure()) return;
  }
}

// Repeated look-back launches on one temp buffer: each call's words are cleared, none is read
// from an earlier call.
TEST_F(ScanAxisTest, RepeatedLookBack) {
  GPUSCAN_SEEDED_RNG(rng);
  TempBuffer temp;
  for (int k = 0; k < 20; ++k) {
    CheckColumns<uint32_t, ops::Sum<uint32_t>>(Dims{8192, 64}, Case{k % 2 == 1, k % 3 == 0, false}, {}, false, rng,
                                               temp);
  }
}

}  // namespace
}  // namespace gpuscan::gputest
