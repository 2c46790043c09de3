// gpu_engine_tests as a front's worker (GPUSCAN_AS_FAULT_WORKER set: main.cc): gpuscan-server
// with a test-only trigger. On SIGUSR1 it corrupts the CUDA context of the device it serves
// (fault_kernel.cu), as a real sticky fault would. DeviceDrainTest gives the test program to a
// front as --worker-exe, so the fault lands in one worker process. Never shipped.
#include <pthread.h>
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "fault_kernel.h"
#include "fault_worker.h"
#include "server_main.h"

namespace gpuscan::testing {

int FaultWorkerMain(int argc, char** argv) {
  int device = 0;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::string(argv[i]) == "--devices") device = std::atoi(argv[i + 1]);
  }
  // Every thread blocks the server's shutdown signals and SIGUSR1; only the waiters see them.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGUSR1);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::thread([device] {
    sigset_t usr1;
    sigemptyset(&usr1);
    sigaddset(&usr1, SIGUSR1);
    int sig = 0;
    sigwait(&usr1, &sig);
    const std::string what = InjectStickyDeviceFault(device);
    std::fprintf(stderr, "fault worker: injected a sticky fault on device %d (%s)\n", device, what.c_str());
  }).detach();
  return server::RunServerMain(argc, argv);
}

}  // namespace gpuscan::testing
