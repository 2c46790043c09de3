// The CPU engine's description, algorithm lists and errors, and MakeEngine's choices.
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "engine/engine.h"
#include "engine_runner.h"

namespace gpuscan::unit {
namespace {

using engine::Error;
using engine::ErrorCode;

TEST(CpuEngine, DescribesItself) {
  CpuEngine engine(1);
  EXPECT_EQ(engine.name(), "cpu");
  EXPECT_EQ(engine.threads(), 1);
  EXPECT_EQ(engine.device_name().rfind("cpu (1 thread", 0), 0u) << engine.device_name();
  EXPECT_TRUE(engine.devices().empty());
  EXPECT_EQ(engine.scan_algorithms(),
            (std::vector<ScanAlgorithm>{ScanAlgorithm::kDefault, ScanAlgorithm::kCpuBlocked,
                                        ScanAlgorithm::kDeterministic}));
  EXPECT_EQ(engine.reduce_algorithms(), (std::vector<std::string>{"cpu_blocked", "deterministic"}));
  EXPECT_EQ(engine.compact_algorithms(), std::vector<std::string>{"cpu_blocked"});
  EXPECT_TRUE(engine.healthy());
  const int all = CpuEngine(0).threads();
  EXPECT_GE(all, 1);
  EXPECT_EQ(CpuEngine(all + 5).threads(), all);  // capped at the hardware's
}

TEST(CpuEngine, DefaultAndCpuBlockedRunCpuBlocked) {
  CpuEngine engine(1);
  for (ScanAlgorithm a : {ScanAlgorithm::kDefault, ScanAlgorithm::kCpuBlocked}) {
    ScanSpec spec;
    spec.algorithm = a;
    EXPECT_EQ(engine.NewScan(spec)->algorithm(), "cpu_blocked");
  }
  EXPECT_EQ(engine.NewReduce(ReduceSpec{})->algorithm(), "cpu_blocked");
  EXPECT_EQ(engine.NewCompact(CompactSpec{})->algorithm(), "cpu_blocked");
}

template <class F>
void ExpectError(F&& f, ErrorCode code, const std::string& message_part) {
  try {
    f();
    ADD_FAILURE() << "no error thrown; expected one mentioning '" << message_part << "'";
  } catch (const Error& e) {
    EXPECT_EQ(static_cast<int>(e.code()), static_cast<int>(code)) << e.what();
    EXPECT_NE(std::string(e.what()).find(message_part), std::string::npos) << e.what();
  }
}

TEST(CpuEngine, OtherScanAlgorithmsAreUnimplemented) {
  CpuEngine engine(1);
  ScanSpec spec;
  spec.algorithm = ScanAlgorithm::kKoggeStone;
  ExpectError([&] { engine.NewScan(spec); }, ErrorCode::kUnimplemented,
              "scan algorithm 'kogge_stone' is not available on the cpu engine (available: "
              "cpu_blocked, deterministic)");
  for (ScanAlgorithm a :
       {ScanAlgorithm::kDecoupledLookback, ScanAlgorithm::kChained, ScanAlgorithm::kReduceThenScan,
        ScanAlgorithm::kBrentKung, ScanAlgorithm::kBlelloch, ScanAlgorithm::kHillisSteele,
        ScanAlgorithm::kCub}) {
    spec.algorithm = a;
    ExpectError([&] { engine.NewScan(spec); }, ErrorCode::kUnimplemented,
                "'" + std::string(engine::Name(a)) + "'");
  }
}

TEST(CpuEngine, BitwiseOperatorsOnFloatsAreInvalid) {
  CpuEngine engine(1);
  for (DType d : {DType::kFloat32, DType::kFloat64}) {
    for (Op op : {Op::kBitAnd, Op::kBitOr, Op::kBitXor}) {
      const std::string what = std::string(engine::Name(op)) + " is not defined for dtype " +
                               std::string(engine::Name(d));
      ScanSpec scan;
      scan.dtype = d;
      scan.op = op;
      ExpectError([&] { engine.NewScan(scan); }, ErrorCode::kInvalidArgument, what);
      ReduceSpec reduce;
      reduce.dtype = d;
      reduce.op = op;
      ExpectError([&] { engine.NewReduce(reduce); }, ErrorCode::kInvalidArgument, what);
    }
  }
}

TEST(CpuEngine, UnknownEnumValuesAreInvalid) {
  CpuEngine engine(1);
  ScanSpec scan;
  scan.dtype = DType::kFloat32;
  scan.op = static_cast<Op>(99);
  ExpectError([&] { engine.NewScan(scan); }, ErrorCode::kInvalidArgument, "unknown operator");
  CompactSpec compact;
  compact.predicate.op = static_cast<PredicateOp>(42);
  ExpectError([&] { engine.NewCompact(compact); }, ErrorCode::kInvalidArgument,
              "unknown predicate");
  ExpectError([] { CpuEngine bad(-1); }, ErrorCode::kInvalidArgument, "threads");
}

TEST(CpuEngine, ConcurrentSessionsShareThePool) {
  CpuEngine engine(0);
  const std::size_t n = 4 * CpuEngine::kParallelMinElems + 3;
  std::vector<int64_t> in(n);
  for (std::size_t i = 0; i < n; ++i) in[i] = static_cast<int64_t>(i % 1000) - 500;
  const auto ref = testing::ScanRef<int64_t, ops::Sum<int64_t>>(in, false);
  ScanSpec spec;
  spec.dtype = DType::kInt64;
  std::vector<std::vector<int64_t>> results(4);
  std::vector<std::thread> callers;
  for (auto& result : results) {
    callers.emplace_back([&] {
      std::vector<std::size_t> chunks(8, n / 8);
      chunks.push_back(n % 8);
      result = RunScan(engine, spec, in, chunks);
    });
  }
  for (auto& t : callers) t.join();
  for (const auto& result : results) testing::ExpectEqualValues(result, ref);
}

TEST(CpuEngine, SessionsMayOutliveTheEngine) {
  auto engine = std::make_unique<CpuEngine>(2);
  ReduceSpec spec;
  spec.dtype = DType::kUInt32;
  auto session = engine->NewReduce(spec);
  engine.reset();
  const std::vector<uint32_t> in(3 * CpuEngine::kParallelMinElems, 2u);
  StageTimes times;
  session->Process(in.data(), in.size(), times);
  uint32_t sum = 0;
  session->Result(&sum);
  EXPECT_EQ(sum, 6 * CpuEngine::kParallelMinElems);
}

TEST(MakeEngine, CpuAutoAndCuda) {
  engine::EngineOptions options;
  options.cpu_threads = 2;
  std::string why;
  options.kind = engine::EngineKind::kCpu;
  EXPECT_EQ(engine::MakeEngine(options, &why)->name(), "cpu");
  EXPECT_FALSE(why.empty());
  options.kind = engine::EngineKind::kAuto;
  auto automatic = engine::MakeEngine(options, &why);
  options.kind = engine::EngineKind::kCuda;
  if (automatic->name() == "cuda") {  // a GPU machine: auto took the device
    EXPECT_EQ(why.rfind("engine=auto: using cuda", 0), 0u) << why;
    EXPECT_EQ(engine::MakeEngine(options, &why)->name(), "cuda");
  } else {
    EXPECT_EQ(automatic->name(), "cpu");
    EXPECT_EQ(why.rfind("engine=auto: ", 0), 0u) << why;
    EXPECT_NE(why.find(", using cpu"), std::string::npos) << why;
    ExpectError([&] { engine::MakeEngine(options, &why); }, ErrorCode::kUnavailable,
                "engine=cuda requested but");
  }
  options.kind = engine::EngineKind::kCpu;
  EXPECT_EQ(engine::MakeEngine(options, nullptr)->name(), "cpu");
}

}  // namespace
}  // namespace gpuscan::unit
