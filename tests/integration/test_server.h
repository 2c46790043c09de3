// A gpuscan server started in-process on a free loopback port, with a client and a raw stub.
// GPUSCAN_TEST_ENGINE=cuda runs the same suites against the CUDA engine (on a GPU machine).
#pragma once

#include <cstdlib>
#include <memory>
#include <string>

#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <gtest/gtest.h>

#include "bench_suite.h"
#include "engine/engine.h"
#include "gpuscan/client.h"
#include "service/server.h"

namespace gpuscan::testing {

inline engine::EngineKind TestEngineKind() {
  const char* e = std::getenv("GPUSCAN_TEST_ENGINE");
  if (e && std::string(e) == "cuda") return engine::EngineKind::kCuda;
  if (e && std::string(e) == "auto") return engine::EngineKind::kAuto;
  return engine::EngineKind::kCpu;
}

class TestServer {
 public:
  // options.address is always a free loopback port; options.metrics_address passes through
  // ("127.0.0.1:0" for an endpoint on a free port, empty for none). The engine kind always
  // comes from GPUSCAN_TEST_ENGINE; the rest of `eo` passes through.
  explicit TestServer(server::ServerOptions options = {}, engine::EngineOptions eo = {}) {
    options.address = "127.0.0.1:0";
    if (options.workers == 0) options.workers = 4;
    eo.kind = TestEngineKind();
    if (!options.kernel_suite) options.kernel_suite = server::MakeBenchKernelSuite();  // as the server's main
    std::string why;
    server_ = server::Server::Start(options, engine::MakeEngine(eo, &why));
  }
  ~TestServer() { server_->Shutdown(); }

  std::string target() const { return server_->address(); }
  server::Server& server() { return *server_; }
  int metrics_port() const { return server_->metrics_port(); }  // 0 without an endpoint

  ClientOptions client_options(size_t chunk_bytes = 1 << 20) const {
    ClientOptions o;
    o.target = target();
    o.chunk_bytes = chunk_bytes;
    o.timeout = std::chrono::seconds(120);
    return o;
  }
  std::unique_ptr<v1::GpuScan::Stub> stub() const {
    return v1::GpuScan::NewStub(grpc::CreateChannel(target(), grpc::InsecureChannelCredentials()));
  }

 private:
  std::unique_ptr<server::Server> server_;
};

}  // namespace gpuscan::testing
