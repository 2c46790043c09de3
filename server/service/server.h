// gpuscan::server::Server: the gRPC server's lifecycle (Start, Shutdown, Wait), shared by
// gpuscan-server's main and the in-process integration tests.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server_builder.h>

#include "engine/engine.h"

namespace gpuscan::server {

class KernelSuite;  // service/kernel_suite.h

struct ServerOptions {
  std::string address = "127.0.0.1:50051";  // host:port; port 0 picks a free one
  // The Benchmark RPC's kernel suite (gpuscan-server's main gives bench/'s, server/bench_suite.h);
  // null: Benchmark answers FAILED_PRECONDITION.
  std::shared_ptr<KernelSuite> kernel_suite;
  uint32_t max_concurrent = 64;         // calls computing at once
  uint32_t max_queued = 256;            // calls waiting for a slot; beyond: RESOURCE_EXHAUSTED
  uint64_t max_request_bytes = 0;       // total input bytes of one call; 0 = unlimited
  // Input bytes (keys and values) one Sort may hold: a sort needs its whole input at once.
  uint64_t max_sort_bytes = uint64_t{4} << 30;
  // Longest row one Scan2D accepts (cols x element size): a call holds up to a row between chunks.
  uint64_t max_scan2d_row_bytes = uint64_t{64} << 20;
  // Bytes running calls may buffer in all (each reserves its worst case at admission; calls that
  // do not fit wait). 0 = unlimited.
  uint64_t max_inflight_bytes = uint64_t{2} << 30;
  uint64_t chunk_bytes = 4u << 20;      // largest data chunk accepted in one message
  uint32_t workers = 0;                 // compute threads for calls; 0 = hardware threads
  std::chrono::milliseconds shutdown_grace{5000};  // in-flight calls get this long on shutdown
  // Connections older than this get a GOAWAY (their calls still finish), so clients reconnect
  // and re-resolve DNS: pods added behind a headless Service get traffic. 0 = never.
  std::chrono::milliseconds max_connection_age{0};
  // TLS: PEM files. With cert and key the server speaks TLS only; with client_ca as well it
  // demands and verifies a client certificate signed by that CA (mutual TLS).
  std::string tls_cert_file;
  std::string tls_key_file;
  std::string tls_client_ca_file;
  // host:port of the Prometheus /metrics endpoint (port 0 picks a free one); empty = no
  // endpoint (calls are still counted, for when one is wanted: see Server::metrics_port).
  std::string metrics_address;
  // Striped lanes (one array over several calls): the most lanes one array may use, and how
  // long the lanes that arrived wait for the rest before all fail with DEADLINE_EXCEEDED.
  uint32_t max_lanes = 64;
  std::chrono::milliseconds lane_wait{10000};
  // Shared memory for co-located clients: the directory whose files calls may name as regions
  // (empty = off), and the most bytes of regions kept registered for DMA at once.
  std::string shm_dir;
  uint64_t shm_pin_limit = uint64_t{16} << 30;
  // Device memory of callers on this host and GPU (CUDA IPC handles, header.device_memory): off
  // unless set; served on the cuda engine to callers on a unix socket or loopback only.
  bool allow_device_ipc = false;
  // Host memory for the chunks of raw RPCs (Scan, Reduce, Compact), in blocks of chunk_bytes made as needed and
  // registered for DMA with the CUDA engine; chunks beyond it use the heap. 0 = heap only.
  uint64_t payload_pool_bytes = uint64_t{256} << 20;
  // Resident arrays (PutArray, header.resident): the bytes every tenant's arrays may hold together
  // (0 = not served), each tenant's cap (0 = none), and the longest idle time (also the default).
  uint64_t resident_bytes = 0;
  uint64_t tenant_quota_bytes = 0;
  uint64_t spill_bytes = 0;  // --spill-bytes: host memory resident arrays spill to past resident_bytes
  std::chrono::milliseconds resident_ttl{std::chrono::hours(1)};
  // A front's worker (--worker-of-front): its device, written into every resident id it issues
  // (ResidentStore::RouteOf) so the front sends each call to the worker that has its arrays. -1: none.
  int resident_route = -1;
  // gRPC core channel arguments of the listening server (name -> int, e.g.
  // grpc.http2.max_frame_size), after the server's own: a tuning knob, applied as given.
  std::map<std::string, int> grpc_int_args;
  // Called once when the engine turns unhealthy (a worker process of a front ends itself).
  std::function<void()> on_unhealthy;
};

// The server credentials `options` ask for: TLS (or mutual TLS) from the PEM files, else
// insecure. Throws std::invalid_argument naming the flag or file at fault.
std::shared_ptr<grpc::ServerCredentials> MakeServerCredentials(const ServerOptions& options);

// True when `address` (host:port) can only be reached from this machine (loopback, unix socket).
bool IsLoopbackAddress(const std::string& address);

// gRPC's receive limit for one message under these options.
uint64_t MaxReceiveMessageBytes(const ServerOptions& options);

// What `options` ask of the listening gRPC server, a plain one or a front's (front.h): the address
// with its credentials (the bound port lands in *port), message limits, connection age and the
// --grpc-arg channel arguments.
void ConfigureListener(const ServerOptions& options, grpc::ServerBuilder& builder, int* port);

class Server {
 public:
  // Builds and starts the server (health and reflection services included) and, with
  // options.metrics_address, the metrics endpoint; throws std::runtime_error when either
  // address cannot be bound, std::invalid_argument for bad TLS options. Warns loudly when it
  // listens without TLS on a non-loopback address.
  static std::unique_ptr<Server> Start(const ServerOptions& options,
                                       std::unique_ptr<engine::Engine> engine);
  virtual ~Server() = default;
  virtual int port() const = 0;            // the bound port
  virtual std::string address() const = 0; // host:bound-port, usable as a client target
  virtual const engine::Engine& engine() const = 0;
  virtual int metrics_port() const = 0;    // the /metrics endpoint's bound port; 0 when off
  // Stops accepting calls, lets in-flight ones finish within options.shutdown_grace, then
  // cancels the rest. Safe to call more than once and from any thread but a gRPC callback.
  virtual void Shutdown() = 0;
  virtual void Wait() = 0;  // blocks until Shutdown has completed
};

}  // namespace gpuscan::server
