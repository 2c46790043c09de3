// gpu_engine_tests' main: the tests, or, with GPUSCAN_AS_FAULT_WORKER set (DeviceDrainTest's
// front passes its environment on to its workers), a worker that can be given a sticky fault.
#include <gtest/gtest.h>

#include <cstdlib>

#include "fault_worker.h"

int main(int argc, char** argv) {
  if (const char* v = std::getenv("GPUSCAN_AS_FAULT_WORKER"); v && *v) {
    return gpuscan::testing::FaultWorkerMain(argc, argv);
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
