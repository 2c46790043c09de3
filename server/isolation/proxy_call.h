// ProxyCall: one client call forwarded, message for message, to a device's worker process
// (worker_pool.h). Messages stay gRPC byte buffers end to end (no parsing of the data), with one
// message in flight each way: the transports' own windows keep both pipes full. Metadata,
// deadline, cancellation and the final status (trailers included) pass through both ways.
//
// Routing: a call naming resident arrays (header.resident, GetArray's and DropArray's id, a
// Pipeline's stage inputs) goes to the worker of the device in their ids (ResidentStore::RouteOf;
// inputs on two devices: INVALID_ARGUMENT); a striped array's lanes (header.lanes of Scan, Reduce,
// Compact) all go to the worker its first lane went to; device memory to its device's worker; any
// other call (PutArray among them) to the up worker with the fewest open calls. The front answers
// GetServerInfo and ListArrays itself and relays Benchmark device by device (front.cc).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include <grpcpp/client_context.h>
#include <grpcpp/generic/async_generic_service.h>

#include "isolation/worker_pool.h"
#include "metrics/metrics.h"

namespace gpuscan::server {

// Which worker each striped array's lanes go to, by array id.
class ArrayRoutes {
 public:
  // The device of `id`'s lanes: the one recorded for it, or, for its first lane, the one
  // `pick` returns (recorded now; -1: none, not recorded). One lock over both, so lanes that
  // arrive at once agree.
  int Claim(const std::string& id, const std::function<int()>& pick);

 private:
  using Clock = std::chrono::steady_clock;
  static constexpr size_t kKept = 4096;  // ids remembered (the oldest go first)
  std::mutex mu_;
  std::map<std::string, std::pair<int, Clock::time_point>> routes_;
};

// What every ProxyCall of a front uses.
struct FrontContext {
  WorkerPool* pool = nullptr;
  Metrics* metrics = nullptr;
  ArrayRoutes* routes = nullptr;
  // The worker's device whose UUID this is (header.device_memory.device_uuid); nullopt: unknown.
  std::function<std::optional<int>(const std::string& uuid)> device_of;
  // Answers calls the front serves itself (GetServerInfo, Benchmark); null: forward.
  std::function<grpc::ServerGenericBidiReactor*(grpc::GenericCallbackServerContext*)> local;
};

// The reactor for one call of the front's generic service.
grpc::ServerGenericBidiReactor* StartProxyCall(FrontContext* front, grpc::GenericCallbackServerContext* ctx);

// What goes along from the caller's call to its worker's: the caller's metadata (less gRPC's own
// and any gpuscan-front-tenant it sent), under mutual TLS the tenant of its certificate as
// gpuscan-front-tenant (resident_store.h TenantOf), and its deadline.
void ForwardCaller(const grpc::GenericCallbackServerContext& ctx, grpc::ClientContext* up);

// "scan" for "/gpuscan.v1.GpuScan/Scan", "segmented_scan" for ".../SegmentedScan"; the method
// itself for one of another service.
std::string OpOfMethod(const std::string& method);

}  // namespace gpuscan::server
