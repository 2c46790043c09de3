// What every call handler shares: the engine, the worker pool, admission, the options and
// the metrics.
#pragma once

#include <atomic>
#include <functional>

#include "engine/engine.h"
#include "metrics/metrics.h"
#include "service/admission.h"
#include "service/device_memory.h"
#include "service/executor.h"
#include "service/lane_registry.h"
#include "service/payload.h"
#include "service/resident_store.h"
#include "service/server.h"
#include "service/shm_region.h"

namespace gpuscan::server {

struct CallContext {
  engine::Engine* engine = nullptr;
  Executor* executor = nullptr;
  Admission* admission = nullptr;
  const ServerOptions* options = nullptr;
  Metrics* metrics = nullptr;  // every call is recorded here once it is done
  // Called after a call failed inside the engine, so the server can re-check engine health.
  std::function<void()> on_engine_failure;
  // Set while a Benchmark call owns the device (one at a time per server).
  std::atomic<bool>* benchmark_running = nullptr;
  // Arrays striped over several calls (lanes), joined by id.
  LaneRegistry* lanes = nullptr;
  // Shared-memory regions under --shm-dir (disabled without it: calls get FAILED_PRECONDITION).
  shm::RegionDir* regions = nullptr;
  // Callers' device memory (CUDA IPC handles; disabled without --allow-device-ipc).
  IpcHandles* device_ipc = nullptr;
  // Where raw RPCs (Scan, Reduce) put their chunks' bytes: blocks registered with the engine.
  PayloadPool* payloads = nullptr;
  // Arrays kept between calls (PutArray, header.resident; not served without --resident-bytes).
  ResidentStore* resident = nullptr;
};

}  // namespace gpuscan::server
