// Test-only fault injection into the CUDA context the engine runs on (see fault_kernel.cu).
#pragma once

#include <string>

namespace gpuscan::testing {

// Corrupts `device`'s primary context with an illegal-address fault; returns the error's name
// as the synchronisation reported it (expected: cudaErrorIllegalAddress).
std::string InjectStickyDeviceFault(int device);

}  // namespace gpuscan::testing
