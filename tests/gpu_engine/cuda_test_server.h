// The CUDA engine and an in-process server on it, for the gpu_engine tests; without a usable
// device the engine is null and the reason says why, so a test can skip with it.
#pragma once

#include <memory>
#include <string>

#include "bench_suite.h"
#include "engine/engine.h"
#include "service/server.h"

namespace gpuscan::testing {

// MakeEngine with kind cuda (the rest of `eo` as given; device 0 alone unless eo.devices says
// otherwise: these tests are about one device's engine); null and *why set when there is none.
inline std::unique_ptr<engine::Engine> CudaEngineOrNull(engine::EngineOptions eo, std::string* why) {
  eo.kind = engine::EngineKind::kCuda;
  if (eo.devices.empty()) eo.devices = {0};
  try {
    return engine::MakeEngine(eo, nullptr);
  } catch (const engine::Error& e) {
    *why = std::string("no CUDA device: ") + e.what();
    return nullptr;
  }
}

// A server on a free loopback port running `eng`.
inline std::unique_ptr<server::Server> StartOnLoopback(std::unique_ptr<engine::Engine> eng,
                                                       server::ServerOptions so = {}) {
  so.address = "127.0.0.1:0";
  if (!so.kernel_suite) so.kernel_suite = server::MakeBenchKernelSuite();  // as the server's main
  return server::Server::Start(so, std::move(eng));
}

}  // namespace gpuscan::testing
