// Runs the integration suites against the engine GPUSCAN_TEST_ENGINE names (cpu by default).
// With cuda requested on a machine without a usable device it exits 77, which CTest reports
// as skipped, so the CUDA run of these suites stays green where no GPU exists.
#include <cstdio>

#include <gtest/gtest.h>

#include "test_server.h"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (gpuscan::testing::TestEngineKind() == gpuscan::engine::EngineKind::kCuda) {
    gpuscan::engine::EngineOptions o;
    o.kind = gpuscan::engine::EngineKind::kCuda;
    try {
      gpuscan::engine::MakeEngine(o, nullptr);
    } catch (const std::exception& e) {
      std::printf("skipped: GPUSCAN_TEST_ENGINE=cuda but %s\n", e.what());
      return 77;
    }
  }
  return RUN_ALL_TESTS();
}
