// CPU engine segmented scans (issue 13) against testing::SegmentedScanRef: every dtype and
// operator, inclusive and exclusive, keys of every key dtype and head flags, segments of one
// element, segments spanning chunks and one long one; exact where the arithmetic is exact, and
// for float SUM/PRODUCT bit for bit the canonical tree over pairs (and near the sequential
// result) whatever the chunking or thread count.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "canonical_reference.h"
#include "engine/reduce_by_key.h"
#include "engine_runner.h"

namespace gpuscan::unit {
namespace {

using engine::SegmentedScanSpec;

// Raw key bytes for key_dtype k (cycled per case), or head bytes, and the heads they mean.
struct Segments {
  SegmentedScanSpec spec;
  std::vector<unsigned char> raw;
  std::vector<uint8_t> heads;
};

template <class K>
Segments KeySegments(std::size_t n, std::mt19937_64& rng, std::size_t mean_run) {
  const std::vector<K> keys = testing::RandomSegmentKeys<K>(n, rng, mean_run);
  Segments s;
  s.spec.key_dtype = DTypeOf<K>();
  s.raw.resize(n * sizeof(K));
  if (n) std::memcpy(s.raw.data(), keys.data(), n * sizeof(K));
  s.heads = testing::HeadsOfKeys(keys);
  return s;
}

Segments HeadSegments(std::size_t n, std::mt19937_64& rng, std::size_t mean_run) {
  Segments s = KeySegments<uint32_t>(n, rng, mean_run);
  s.spec.heads = true;
  // Any nonzero byte is a head; element 0's flag is ignored (it always begins a segment).
  for (std::size_t i = 0; i < n; ++i) s.heads[i] = s.heads[i] ? static_cast<uint8_t>(1 + rng() % 255) : 0;
  if (n) s.heads[0] = 0;
  s.raw.assign(s.heads.begin(), s.heads.end());
  return s;
}

Segments MakeSegments(int which, std::size_t n, std::mt19937_64& rng, std::size_t mean_run) {
  switch (which % 5) {
    case 0: return KeySegments<int32_t>(n, rng, mean_run);
    case 1: return KeySegments<int64_t>(n, rng, mean_run);
    case 2: return KeySegments<uint32_t>(n, rng, mean_run);
    case 3: return KeySegments<uint64_t>(n, rng, mean_run);
    default: return HeadSegments(n, rng, mean_run);
  }
}

std::string Name(const SegmentedScanSpec& spec) {
  return spec.heads ? std::string("heads") : "keys " + std::string(engine::Name(spec.key_dtype));
}

template <class T, class O>
void CheckSegmented(Op op, std::size_t n, std::size_t mean_run, int which) {
  GPUSCAN_SEEDED_RNG(rng);
  const std::vector<T> x = testing::RandomInput<T, O>(n, rng);
  Segments seg = MakeSegments(which, n, rng, mean_run);
  CpuEngine one(1), many(0);
  for (const bool exclusive : {false, true}) {
    seg.spec.dtype = DTypeOf<T>();
    seg.spec.op = op;
    seg.spec.exclusive = exclusive;
    const std::string what = std::string(engine::Name(seg.spec.dtype)) + " " + std::string(engine::Name(op)) +
                             (exclusive ? " exclusive" : " inclusive") + ", " + Name(seg.spec) +
                             ", n=" + std::to_string(n);
    const std::vector<T> seq = testing::SegmentedScanRef<T, O>(x, seg.heads, exclusive);
    std::vector<T> first;
    for (CpuEngine* e : {&one, &many}) {
      for (const auto& chunks : {std::vector<std::size_t>{n}, testing::RandomChunkLengths(n, rng, 1000),
                                 testing::RandomChunkLengths(n, rng, n < 100000 ? 5 : 40000)}) {
        const std::vector<T> got = RunSegmentedScan(*e, seg.spec, x, seg.raw, chunks);
        const std::string where = what + ", " + Describe(chunks) + ", threads " + std::to_string(e->threads());
        if constexpr (testing::kRounds<T, O>) {
          // Reproducible: the canonical tree over pairs, bit for bit; and near the sequential scan.
          const std::vector<T> tree = testing::SegmentedCanonicalRef<T, O>(x, seg.heads, exclusive);
          ASSERT_TRUE(testing::SameBytes(got.data(), tree.data(), n * sizeof(T))) << where << ": not the canonical bits";
          testing::ExpectScanNear<T, O>(got, seq, x, exclusive, where);
        } else {
          testing::ExpectEqualValues(got, seq, where);
        }
        if (first.empty()) first = got;
        ASSERT_TRUE(testing::SameBytes(got.data(), first.data(), n * sizeof(T))) << where << ": bits differ between runs";
      }
    }
  }
}

template <class T>
void CheckEveryOperator(std::size_t n, std::size_t mean_run, int which) {
  CheckSegmented<T, ops::Sum<T>>(Op::kSum, n, mean_run, which);
  CheckSegmented<T, ops::Product<T>>(Op::kProduct, n, mean_run, which + 1);
  CheckSegmented<T, ops::Min<T>>(Op::kMin, n, mean_run, which + 2);
  CheckSegmented<T, ops::Max<T>>(Op::kMax, n, mean_run, which + 3);
  if constexpr (std::is_integral_v<T>) {
    CheckSegmented<T, ops::BitAnd<T>>(Op::kBitAnd, n, mean_run, which + 4);
    CheckSegmented<T, ops::BitOr<T>>(Op::kBitOr, n, mean_run, which + 5);
    CheckSegmented<T, ops::BitXor<T>>(Op::kBitXor, n, mean_run, which + 6);
  }
}

TEST(CpuSegmentedScan, EveryDTypeOperatorAndKeyKind) {
  // 70001 elements: past the engine's parallel threshold and across canonical tiles.
  CheckEveryOperator<int32_t>(70001, 40, 0);
  CheckEveryOperator<int64_t>(70001, 40, 1);
  CheckEveryOperator<uint32_t>(70001, 40, 2);
  CheckEveryOperator<uint64_t>(70001, 40, 3);
  CheckEveryOperator<float>(70001, 40, 4);
  CheckEveryOperator<double>(70001, 40, 0);
}

TEST(CpuSegmentedScan, EdgeLengthsAndRunLengths) {
  for (const std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{2}, std::size_t{4095}, std::size_t{4097}}) {
    for (const std::size_t run : {std::size_t{1}, std::size_t{3}, std::size_t{5000}}) {
      CheckSegmented<float, ops::Sum<float>>(Op::kSum, n, run, static_cast<int>(n + run));
      CheckSegmented<int32_t, ops::Sum<int32_t>>(Op::kSum, n, run, static_cast<int>(n + run + 1));
    }
  }
}

// Segments spanning canonical supers (2^20 elements) and one segment of the whole array.
TEST(CpuSegmentedScan, LongSegmentsAcrossSupers) {
  CheckSegmented<float, ops::Sum<float>>(Op::kSum, (1u << 20) + 4099, 200000, 4);
  CheckSegmented<double, ops::Product<double>>(Op::kProduct, 300001, 1u << 20, 1);
}

TEST(CpuSegmentedScan, RefusesFloatKeysAndBitwiseFloats) {
  CpuEngine engine(1);
  SegmentedScanSpec spec;
  spec.key_dtype = DType::kFloat32;
  try {
    engine.NewSegmentedScan(spec);
    ADD_FAILURE() << "float keys accepted";
  } catch (const engine::Error& e) {
    EXPECT_EQ(e.code(), engine::ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("float32"), std::string::npos) << e.what();
  }
  spec.key_dtype = DType::kInt32;
  spec.dtype = DType::kFloat64;
  spec.op = Op::kBitXor;
  EXPECT_THROW(engine.NewSegmentedScan(spec), engine::Error);
}

// Reduce by key through engine::RunReducer: the runs of the reference, each value exact (or, for
// float SUM/PRODUCT, the canonical segmented scan's bits at the run's last element), for any
// chunking; runs that end at a chunk's edge come out with the next chunk or at the end.
template <class T, class O, class K>
void CheckReduceByKey(Op op, std::size_t n, std::size_t mean_run) {
  GPUSCAN_SEEDED_RNG(rng);
  const std::vector<T> x = testing::RandomInput<T, O>(n, rng);
  const std::vector<K> keys = testing::RandomSegmentKeys<K>(n, rng, mean_run);
  const auto want = testing::ReduceByKeyRef<T, O, K>(x, keys);
  std::vector<T> want_values = want.second;
  if constexpr (testing::kRounds<T, O>) {
    const std::vector<T> tree = testing::SegmentedCanonicalRef<T, O>(x, testing::HeadsOfKeys(keys), false);
    for (std::size_t i = 0, r = 0; i < n; ++i) {
      if (i + 1 == n || keys[i + 1] != keys[i]) want_values[r++] = tree[i];
    }
  }
  CpuEngine engine(0);
  engine::SegmentedScanSpec spec;
  spec.dtype = DTypeOf<T>();
  spec.op = op;
  spec.key_dtype = DTypeOf<K>();
  for (const auto& chunks : {std::vector<std::size_t>{n}, testing::RandomChunkLengths(n, rng, 700),
                             testing::RandomChunkLengths(n, rng, 3)}) {
    engine::RunReducer reducer(engine, spec);
    std::string got_keys, got_values;
    StageTimes times;
    std::size_t offset = 0;
    uint64_t runs = 0;
    for (std::size_t len : chunks) {
      runs += reducer.Process(x.data() + offset, keys.data() + offset, len, &got_keys, &got_values, times);
      offset += len;
    }
    runs += reducer.Finish(&got_keys, &got_values);
    const std::string what = std::string(engine::Name(spec.dtype)) + " " + std::string(engine::Name(op)) + ", keys " +
                             std::string(engine::Name(spec.key_dtype)) + ", n=" + std::to_string(n) + ", " +
                             Describe(chunks);
    ASSERT_EQ(runs, want.first.size()) << what;
    ASSERT_EQ(got_keys.size(), runs * sizeof(K)) << what;
    ASSERT_EQ(got_values.size(), runs * sizeof(T)) << what;
    std::vector<K> k(runs);
    std::vector<T> v(runs);
    if (runs) {
      std::memcpy(k.data(), got_keys.data(), got_keys.size());
      std::memcpy(v.data(), got_values.data(), got_values.size());
    }
    EXPECT_EQ(k, want.first) << what;
    if constexpr (testing::kRounds<T, O>) {
      EXPECT_TRUE(testing::SameBytes(v.data(), want_values.data(), runs * sizeof(T))) << what << ": not the canonical bits";
      testing::ExpectEqualValues(v, want_values, what);
    } else {
      testing::ExpectEqualValues(v, want_values, what);
    }
  }
}

TEST(CpuReduceByKey, EveryDTypeOperatorAndKeyDType) {
  for (const std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{5000}, std::size_t{70001}}) {
    CheckReduceByKey<int32_t, ops::Sum<int32_t>, int64_t>(Op::kSum, n, 30);
    CheckReduceByKey<uint64_t, ops::BitXor<uint64_t>, int32_t>(Op::kBitXor, n, 3);
    CheckReduceByKey<int64_t, ops::Max<int64_t>, uint32_t>(Op::kMax, n, 400);
    CheckReduceByKey<uint32_t, ops::Product<uint32_t>, uint64_t>(Op::kProduct, n, 1);
    CheckReduceByKey<float, ops::Sum<float>, int32_t>(Op::kSum, n, 100);
    CheckReduceByKey<float, ops::Min<float>, uint64_t>(Op::kMin, n, 100);
    CheckReduceByKey<double, ops::Product<double>, int64_t>(Op::kProduct, n, 5000);
    CheckReduceByKey<double, ops::Max<double>, int32_t>(Op::kMax, n, 7);
  }
}

}  // namespace
}  // namespace gpuscan::unit
