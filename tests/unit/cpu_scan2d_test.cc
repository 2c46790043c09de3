// CPU engine 2-D scans (summed-area tables, issue 13) against testing::Scan2DRef, bit for bit:
// every dtype and operator, shapes around the engine's column strips and parallel threshold,
// rows handed over in random runs (the carry row crosses calls), one thread and many.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "engine_runner.h"

namespace gpuscan::unit {
namespace {

using engine::Scan2DSpec;

template <class T, class O>
void CheckScan2D(Op op, std::size_t rows, std::size_t cols) {
  GPUSCAN_SEEDED_RNG(rng);
  const std::vector<T> x = testing::RandomInput<T, O>(rows * cols, rng);
  const std::vector<T> ref = testing::Scan2DRef<T, O>(x, rows, cols);
  Scan2DSpec spec;
  spec.dtype = DTypeOf<T>();
  spec.op = op;
  spec.cols = cols;
  const std::string what = std::string(engine::Name(spec.dtype)) + " " + std::string(engine::Name(op)) + " " +
                           std::to_string(rows) + " x " + std::to_string(cols);
  CpuEngine one(1), many(0);
  for (CpuEngine* e : {&one, &many}) {
    for (const auto& chunks : {std::vector<std::size_t>{rows}, testing::RandomChunkLengths(rows, rng, 3)}) {
      const std::vector<T> got = RunScan2D(*e, spec, x, chunks);
      ASSERT_TRUE(testing::SameBits(got, ref)) << what << ", " << chunks.size() << " calls, threads " << e->threads();
    }
  }
}

template <class T>
void CheckEveryOperator2D(std::size_t rows, std::size_t cols) {
  CheckScan2D<T, ops::Sum<T>>(Op::kSum, rows, cols);
  CheckScan2D<T, ops::Product<T>>(Op::kProduct, rows, cols);
  CheckScan2D<T, ops::Min<T>>(Op::kMin, rows, cols);
  CheckScan2D<T, ops::Max<T>>(Op::kMax, rows, cols);
  if constexpr (std::is_integral_v<T>) {
    CheckScan2D<T, ops::BitAnd<T>>(Op::kBitAnd, rows, cols);
    CheckScan2D<T, ops::BitOr<T>>(Op::kBitOr, rows, cols);
    CheckScan2D<T, ops::BitXor<T>>(Op::kBitXor, rows, cols);
  }
}

TEST(CpuScan2D, EveryDTypeAndOperator) {
  // 70 x 1111: past the parallel threshold; 3 x 16385: a column strip (16 Ki) and one more.
  for (const auto& [rows, cols] : {std::pair<std::size_t, std::size_t>{70, 1111}, {3, 16385}}) {
    CheckEveryOperator2D<int32_t>(rows, cols);
    CheckEveryOperator2D<int64_t>(rows, cols);
    CheckEveryOperator2D<uint32_t>(rows, cols);
    CheckEveryOperator2D<uint64_t>(rows, cols);
    CheckEveryOperator2D<float>(rows, cols);
    CheckEveryOperator2D<double>(rows, cols);
  }
}

TEST(CpuScan2D, EdgeShapes) {
  for (const auto& [rows, cols] : {std::pair<std::size_t, std::size_t>{0, 7}, {1, 1}, {1, 100000}, {100000, 1},
                                   {2, 2}, {129, 65}}) {
    CheckScan2D<float, ops::Sum<float>>(Op::kSum, rows, cols);
    CheckScan2D<int64_t, ops::Sum<int64_t>>(Op::kSum, rows, cols);
  }
}

// A leading -0.0 stays -0.0 (no identity is folded in), and NaN spreads right and down.
TEST(CpuScan2D, SignedZeroAndNan) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> x = {-0.0f, -0.0f, 1.0f, nan, 2.0f, -0.0f};  // 2 x 3
  CpuEngine engine(1);
  Scan2DSpec spec;
  spec.dtype = DType::kFloat32;
  spec.cols = 3;
  const std::vector<float> got = RunScan2D(engine, spec, x, {2});
  EXPECT_TRUE(testing::SameBits(got, testing::Scan2DRef<float, ops::Sum<float>>(x, 2, 3)));
  EXPECT_TRUE(std::signbit(got[0]) && got[0] == 0.0f);
  EXPECT_TRUE(std::isnan(got[3]) && std::isnan(got[4]) && std::isnan(got[5]));
}

// Axis scans (issue 47) against testing::ScanAxisRef, bit for bit: each axis, inclusive and
// exclusive, rows handed over in random runs (a column's carry crosses calls), one thread and many.
template <class T, class O>
void CheckScanAxis(Op op, std::size_t rows, std::size_t cols) {
  GPUSCAN_SEEDED_RNG(rng);
  const std::vector<T> x = testing::RandomInput<T, O>(rows * cols, rng);
  CpuEngine one(1), many(0);
  for (engine::ScanAxis axis : {engine::ScanAxis::kRows, engine::ScanAxis::kColumns}) {
    for (bool exclusive : {false, true}) {
      const bool along_rows = axis == engine::ScanAxis::kRows;
      const std::vector<T> ref = testing::ScanAxisRef<T, O>(x, rows, cols, along_rows, exclusive);
      Scan2DSpec spec;
      spec.dtype = DTypeOf<T>();
      spec.op = op;
      spec.cols = cols;
      spec.axis = axis;
      spec.exclusive = exclusive;
      const std::string what = std::string(engine::Name(spec.dtype)) + " " + std::string(engine::Name(op)) + " " +
                               std::to_string(rows) + " x " + std::to_string(cols) +
                               (along_rows ? " rows" : " columns") + (exclusive ? " exclusive" : "");
      for (CpuEngine* e : {&one, &many}) {
        for (const auto& chunks : {std::vector<std::size_t>{rows}, testing::RandomChunkLengths(rows, rng, 4)}) {
          const std::vector<T> got = RunScan2D(*e, spec, x, chunks);
          ASSERT_TRUE(testing::SameBits(got, ref)) << what << ", " << chunks.size() << " calls, threads " << e->threads();
        }
      }
    }
  }
}

template <class T>
void CheckEveryOperatorAxis(std::size_t rows, std::size_t cols) {
  CheckScanAxis<T, ops::Sum<T>>(Op::kSum, rows, cols);
  CheckScanAxis<T, ops::Product<T>>(Op::kProduct, rows, cols);
  CheckScanAxis<T, ops::Min<T>>(Op::kMin, rows, cols);
  CheckScanAxis<T, ops::Max<T>>(Op::kMax, rows, cols);
  if constexpr (std::is_integral_v<T>) {
    CheckScanAxis<T, ops::BitAnd<T>>(Op::kBitAnd, rows, cols);
    CheckScanAxis<T, ops::BitOr<T>>(Op::kBitOr, rows, cols);
    CheckScanAxis<T, ops::BitXor<T>>(Op::kBitXor, rows, cols);
  }
}

TEST(CpuScanAxis, EveryDTypeAndOperator) {
  // 70 x 1111: past the parallel threshold; 3 x 16385: a column strip (16 Ki) and one more.
  for (const auto& [rows, cols] : {std::pair<std::size_t, std::size_t>{70, 1111}, {3, 16385}}) {
    CheckEveryOperatorAxis<int32_t>(rows, cols);
    CheckEveryOperatorAxis<int64_t>(rows, cols);
    CheckEveryOperatorAxis<uint32_t>(rows, cols);
    CheckEveryOperatorAxis<uint64_t>(rows, cols);
    CheckEveryOperatorAxis<float>(rows, cols);
    CheckEveryOperatorAxis<double>(rows, cols);
  }
}

TEST(CpuScanAxis, EdgeShapes) {
  for (const auto& [rows, cols] : {std::pair<std::size_t, std::size_t>{0, 7}, {1, 1}, {1, 100000}, {100000, 1},
                                   {2, 2}, {129, 65}, {1, 2}, {2, 1}}) {
    CheckScanAxis<float, ops::Sum<float>>(Op::kSum, rows, cols);
    CheckScanAxis<int64_t, ops::Max<int64_t>>(Op::kMax, rows, cols);
  }
}

// A leading -0.0 stays -0.0 in inclusive scans (no identity folded in), the exclusive scan's
// first element is the identity (+0.0 for SUM), and a NaN spreads along its row or column only.
TEST(CpuScanAxis, SignedZeroAndNan) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> x = {-0.0f, 1.0f, nan, nan, 2.0f, -0.0f};  // 2 x 3
  CpuEngine engine(1);
  Scan2DSpec spec;
  spec.dtype = DType::kFloat32;
  spec.cols = 3;
  spec.axis = engine::ScanAxis::kRows;
  std::vector<float> got = RunScan2D(engine, spec, x, {2});
  EXPECT_TRUE(std::signbit(got[0]) && got[0] == 0.0f);
  EXPECT_EQ(got[1], 1.0f);
  EXPECT_TRUE(std::isnan(got[2]) && std::isnan(got[3]) && std::isnan(got[5]));
  spec.axis = engine::ScanAxis::kColumns;
  spec.exclusive = true;
  got = RunScan2D(engine, spec, x, {1, 1});
  EXPECT_FALSE(std::signbit(got[0]));
  EXPECT_TRUE(std::signbit(got[3]) && got[3] == 0.0f);  // the exclusive column carries x[0][0]
  EXPECT_EQ(got[4], 1.0f);
  EXPECT_TRUE(std::isnan(got[5]));
}

TEST(CpuScan2D, RefusesZeroColumnsAndBitwiseFloats) {
  CpuEngine engine(1);
  Scan2DSpec spec;
  spec.cols = 0;
  EXPECT_THROW(engine.NewScan2D(spec), engine::Error);
  spec.cols = 4;
  spec.dtype = DType::kFloat64;
  spec.op = Op::kBitOr;
  EXPECT_THROW(engine.NewScan2D(spec), engine::Error);
}

}  // namespace
}  // namespace gpuscan::unit
