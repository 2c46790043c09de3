// bench/'s kernel suite behind the service's KernelSuite (service/kernel_suite.h): the server's
// main and the tests give it to the server, so only they depend on bench/, never the service.
#pragma once

#include <memory>

#include "service/kernel_suite.h"

namespace gpuscan::server {

// bench::RunKernelSuite; null in a build without bench/ (no CUDA).
std::shared_ptr<KernelSuite> MakeBenchKernelSuite();

}  // namespace gpuscan::server
