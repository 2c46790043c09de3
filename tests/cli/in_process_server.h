// The real gpuscan server (CPU engine) started in this process on a free loopback port (or
// `address`); with shm_dir, shared-memory calls open regions there (--shm-dir); with
// resident_bytes, it keeps resident arrays up to that many bytes (--resident-bytes).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "engine/engine.h"
#include "service/server.h"

namespace gpuscan::cli_test {

inline std::unique_ptr<server::Server> StartCpuServer(const std::string& address = "127.0.0.1:0",
                                                      const std::string& shm_dir = "",
                                                      uint64_t resident_bytes = 0) {
  server::ServerOptions options;
  options.address = address;
  options.shm_dir = shm_dir;
  options.resident_bytes = resident_bytes;
  engine::EngineOptions eo;
  eo.kind = engine::EngineKind::kCpu;
  std::string why;
  return server::Server::Start(options, engine::MakeEngine(eo, &why));
}

}  // namespace gpuscan::cli_test
