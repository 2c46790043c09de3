// What every call handler shares: the engine, the worker pool, admission and the options.
#pragma once

#include <atomic>
#include <functional>

#include "engine/engine.h"
#include "service/admission.h"
#include "service/executor.h"
#include "service/server.h"

namespace gpuscan::server {

struct CallContext {
  engine::Engine* engine = nullptr;
  Executor* executor = nullptr;
  Admission* admission = nullptr;
  const ServerOptions* options = nullptr;
  // Called after a call failed inside the engine, so the server can re-check engine health.
  std::function<void()> on_engine_failure;
  // Set while a Benchmark call owns the device (one at a time per server).
  std::atomic<bool>* benchmark_running = nullptr;
};

}  // namespace gpuscan::server
