// MakeEngine: picks the compute backend. The CUDA engine plugs in at MakeCudaEngine below.
#include <memory>
#include <string>

#include "engine/cpu_engine.h"
#include "engine/device_set.h"
#if defined(GPUSCAN_HAVE_CUDA)
#include "engine/cuda_engine.h"
#endif
#include "engine/engine.h"

#if defined(GPUSCAN_HAVE_CUDA)
#include <cuda_runtime_api.h>
#endif

namespace gpuscan::engine {

int CudaDeviceCount() {
#if defined(GPUSCAN_HAVE_CUDA)
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return count;
#else
  return 0;
#endif
}
namespace {

// Returns the CUDA engine, or null with *reason saying why there is none.
std::unique_ptr<Engine> TryCudaEngine(const EngineOptions& options, std::string* reason) {
#if defined(GPUSCAN_HAVE_CUDA)
  return MakeCudaEngine(options, reason);
#else
  (void)options;
  *reason = "no CUDA engine in this build";
  return nullptr;
#endif
}

std::unique_ptr<Engine> MakeCpuEngine(const EngineOptions& options) {
  return std::make_unique<CpuEngine>(options.cpu_threads);
}

}  // namespace

std::unique_ptr<Engine> MakeEngine(const EngineOptions& options, std::string* why) {
  std::string line;
  std::unique_ptr<Engine> engine;
  switch (options.kind) {
    case EngineKind::kCpu:
      engine = MakeCpuEngine(options);
      line = "engine=cpu: requested";
      break;
    case EngineKind::kCuda: {
      std::string reason;
      engine = TryCudaEngine(options, &reason);
      if (!engine) {
        throw Error(ErrorCode::kUnavailable, "engine=cuda requested but " + reason);
      }
      line = "engine=cuda: requested, " + reason;
      break;
    }
    case EngineKind::kAuto: {
      std::string reason;
      engine = TryCudaEngine(options, &reason);
      if (engine) {
        line = "engine=auto: using cuda, " + reason;
      } else {
        engine = MakeCpuEngine(options);
        line = "engine=auto: " + reason + ", using cpu";
      }
      break;
    }
  }
  if (!engine) throw Error(ErrorCode::kInvalidArgument, "unknown engine kind");
  if (options.label_ordinal && engine->name() == "cpu" && options.devices.size() == 1) {
    // A cpu worker of a front (the isolation tests): named by its slot, as a CUDA worker is.
    std::vector<std::string> labels{std::to_string(options.devices[0]) + ": " + engine->device_name()};
    std::vector<std::unique_ptr<Engine>> one;
    one.push_back(std::move(engine));
    engine = std::make_unique<DeviceSet>(std::move(one), std::move(labels));
  }
  if (why) *why = line;
  return engine;
}

}  // namespace gpuscan::engine
