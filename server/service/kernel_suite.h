// The kernel suite as the Benchmark RPC sees it. The server is given one (ServerOptions::
// kernel_suite: gpuscan-server's main wires in bench/'s, server/bench_suite.h), so the service
// never includes or links bench/; a server given none answers Benchmark FAILED_PRECONDITION.
#pragma once

#include <functional>

#include "gpuscan/v1/gpuscan.pb.h"

namespace gpuscan::server {

class KernelSuite {
 public:
  virtual ~KernelSuite() = default;
  // Measures the request's rows on `device` (the request is valid: ValidateBenchmark passed),
  // giving each to on_row as it is taken (its device field the device's name); on_row returns
  // false to stop. Throws engine::Error (kInvalidArgument, kUnavailable, kResourceExhausted).
  virtual void Run(const v1::BenchmarkRequest& request, int device,
                   const std::function<bool(v1::BenchmarkRow)>& on_row) = 0;
};

}  // namespace gpuscan::server
