// The test program as a front's worker: gpuscan-server plus a SIGUSR1 trigger for a sticky fault.
#pragma once

namespace gpuscan::testing {

int FaultWorkerMain(int argc, char** argv);

}  // namespace gpuscan::testing
