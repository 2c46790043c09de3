// The front of a server whose devices run in worker processes (--isolate-devices): it listens
// where a plain server would (TLS, health, metrics, the same API), starts one worker per device
// (worker_pool.h) and forwards each call to one of them (proxy_call.h). A device whose worker
// dies or turns unhealthy (a sticky CUDA error makes it exit) gets no calls until its worker is
// back; health is SERVING while any device serves. GetServerInfo lists every device; Benchmark
// runs on the devices it names, one after the other.
#pragma once

#include <memory>
#include <string>

#include "isolation/worker_pool.h"
#include "service/server.h"

namespace gpuscan::server {

class Front {
 public:
  // Starts the workers, waits (up to `ready_wait`) for them to serve, then listens on
  // options.address. Throws std::runtime_error when the address cannot be bound.
  static std::unique_ptr<Front> Start(const ServerOptions& options, WorkerPoolOptions pool,
                                      std::chrono::milliseconds ready_wait);
  virtual ~Front() = default;
  virtual std::string address() const = 0;
  virtual int metrics_port() const = 0;
  virtual WorkerPool& pool() = 0;
  // Stops accepting calls, gives in-flight ones options.shutdown_grace, then stops the workers.
  virtual void Shutdown() = 0;
};

}  // namespace gpuscan::server
