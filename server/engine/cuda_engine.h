// The CUDA engine: sessions stream each chunk through pinned staging, async host-to-device
// copies, the kernels of gpuscan::kernels (carry kept on the device between chunks) and async
// device-to-host copies, double-buffered so sub-chunk k+1's copy-in overlaps sub-chunk k's
// kernel and copy-out.
#pragma once

#include <memory>
#include <string>

#include "engine/engine.h"

namespace gpuscan::engine {

// The CUDA engine on options.devices (every device when empty; a DeviceSet when more than one),
// or null with *reason saying why none is usable (no device, no driver). Throws Error when a
// device exists but cannot be set up, or options.devices names one that does not exist.
std::unique_ptr<Engine> MakeCudaEngine(const EngineOptions& options, std::string* reason);

}  // namespace gpuscan::engine
