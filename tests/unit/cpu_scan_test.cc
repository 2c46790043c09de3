// CPU engine scans against the sequential reference: every dtype x operator x inclusive /
// exclusive, at every size of SweepSizes, as one chunk and as random chunks.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine_runner.h"

namespace gpuscan::unit {
namespace {

struct ScanCase {
  DType dtype;
  Op op;
  bool exclusive;
};

std::vector<ScanCase> AllScanCases() {
  std::vector<ScanCase> cases;
  for (DType d : engine::kAllDTypes) {
    for (Op op : engine::kAllOps) {
      if (engine::IsFloat(d) && engine::IsBitwise(op)) continue;
      for (bool exclusive : {false, true}) cases.push_back({d, op, exclusive});
    }
  }
  return cases;
}

std::string ScanCaseName(const ::testing::TestParamInfo<ScanCase>& info) {
  return std::string(engine::Name(info.param.dtype)) + "_" +
         std::string(engine::Name(info.param.op)) +
         (info.param.exclusive ? "_exclusive" : "_inclusive");
}

class CpuScanTest : public ::testing::TestWithParam<ScanCase> {};

TEST_P(CpuScanTest, MatchesReferenceOneChunkAndRandomChunks) {
  const ScanCase c = GetParam();
  CpuEngine engine(0);
  GPUSCAN_SEEDED_RNG(rng);
  ScanSpec spec;
  spec.dtype = c.dtype;
  spec.op = c.op;
  spec.exclusive = c.exclusive;
  engine::Visit(c.dtype, c.op, [&](auto t, auto o) {
    using T = typename decltype(t)::type;
    using O = typename decltype(o)::type;
    for (std::size_t n : SweepSizes<T>()) {
      SCOPED_TRACE(::testing::Message() << "n = " << n);
      const std::vector<T> in = testing::RandomInput<T, O>(n, rng);
      const std::vector<T> ref = testing::ScanRef<T, O>(in, c.exclusive);
      testing::ExpectScanNear<T, O>(RunScan(engine, spec, in, OneChunk(in)), ref, in,
                                    c.exclusive, "one chunk");
      if (n <= 1025) {
        testing::ExpectScanNear<T, O>(
            RunScan(engine, spec, in, std::vector<std::size_t>(n, 1)), ref, in, c.exclusive,
            "one element per chunk");
      }
      const auto chunks = testing::RandomChunkLengths(n, rng, RandomTypicalChunk<T>(n, rng));
      SCOPED_TRACE(Describe(chunks));
      testing::ExpectScanNear<T, O>(RunScan(engine, spec, in, chunks), ref, in, c.exclusive,
                                    "random chunks");
    }
  });
}

INSTANTIATE_TEST_SUITE_P(AllDTypesAndOps, CpuScanTest, ::testing::ValuesIn(AllScanCases()),
                         ScanCaseName);

}  // namespace
}  // namespace gpuscan::unit
