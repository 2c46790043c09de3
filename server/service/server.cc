// The gRPC service (routes each method to its handler family) and the server's lifecycle:
// health and reflection services, limits, graceful shutdown.
#include "service/server.h"

#include <atomic>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <spdlog/spdlog.h>

#include "metrics/endpoint.h"
#include "metrics/metrics.h"
#include "service/admission.h"
#include "service/executor.h"
#include "service/handlers.h"

namespace gpuscan::server {

uint64_t MaxReceiveMessageBytes(const ServerOptions& o) {
  // A compaction request carries a values chunk and its flags (at most a chunk's worth more; a
  // segmented scan's, its keys),
  // plus framing; anything larger is refused by gRPC itself with RESOURCE_EXHAUSTED.
  return 2 * o.chunk_bytes + 64 * 1024;
}

void ConfigureListener(const ServerOptions& o, grpc::ServerBuilder& builder, int* port) {
  builder.AddListeningPort(o.address, MakeServerCredentials(o), port);
  builder.SetMaxReceiveMessageSize(static_cast<int>(MaxReceiveMessageBytes(o)));
  builder.SetMaxSendMessageSize(-1);
  if (o.max_connection_age.count() > 0) {
    // No age grace: a GOAWAY lets the connection's open calls finish however long they take.
    builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_MS, static_cast<int>(o.max_connection_age.count()));
  }
  // Keepalive defaults, each unless --grpc-arg names it (the flag wins). Why: a client whose link
  // goes silent mid-call holds its call (and admission slot) until TCP gives up (~15 min) or the
  // link returns, deadline or not; an unanswered ping closes the connection within time + timeout
  // of the cut (docs/configuration.md, "Keepalive"). Pings go out only while calls are active.
  // Clients (ours ping every 2 s while calls are active) are accepted down to one ping a second
  // without data from us (gRPC's default is 5 min: a client pinging during a long silent call,
  // e.g. a Sort's upload, would collect strikes and get GOAWAY too_many_pings).
  const std::pair<const char*, int> keepalive[] = {
      {GRPC_ARG_KEEPALIVE_TIME_MS, 2000},
      {GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 2000},
      {GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 1000},
      {GRPC_ARG_HTTP2_MAX_PING_STRIKES, 2},
  };
  for (const auto& [name, value] : keepalive) {
    if (!o.grpc_int_args.count(name)) builder.AddChannelArgument(name, value);
  }
  for (const auto& [name, value] : o.grpc_int_args) builder.AddChannelArgument(name, value);
}

namespace {

// The generated callback service with Scan, Reduce, Histogram, Compact, SegmentedScan, ReduceByKey and Transport
// registered raw (grpc::ByteBuffer in and out, wire.h), PutArray too, and every other method typed (Sort and Scan2D measured
// slower raw: bench/notes/wire.md). A method missing here answers UNIMPLEMENTED: the
// integration tests call every one.
using ServiceMethods = v1::GpuScan::WithRawCallbackMethod_Scan<v1::GpuScan::WithRawCallbackMethod_Reduce<v1::GpuScan::WithRawCallbackMethod_Compact<
    v1::GpuScan::WithRawCallbackMethod_Histogram<v1::GpuScan::WithRawCallbackMethod_SegmentedScan<
        v1::GpuScan::WithRawCallbackMethod_ReduceByKey<v1::GpuScan::WithCallbackMethod_Sort<
            v1::GpuScan::WithCallbackMethod_Scan2D<v1::GpuScan::WithCallbackMethod_GetServerInfo<
                v1::GpuScan::WithCallbackMethod_Benchmark<v1::GpuScan::WithRawCallbackMethod_Transport<
                    v1::GpuScan::WithRawCallbackMethod_PutArray<v1::GpuScan::WithCallbackMethod_GetArray<
                        v1::GpuScan::WithCallbackMethod_DropArray<v1::GpuScan::WithCallbackMethod_ListArrays<
                            v1::GpuScan::WithCallbackMethod_Pipeline<v1::GpuScan::Service>>>>>>>>>>>>>>>>;

class GpuScanService final : public ServiceMethods {
 public:
  explicit GpuScanService(CallContext ctx) : ctx_(std::move(ctx)) {}

  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* Scan(grpc::CallbackServerContext* rpc) override {
    return StartScan(ctx_, rpc);
  }
  grpc::ServerReadReactor<grpc::ByteBuffer>* Reduce(grpc::CallbackServerContext* rpc,
                                                    grpc::ByteBuffer* response) override {
    return StartReduce(ctx_, rpc, response);
  }
  grpc::ServerReadReactor<grpc::ByteBuffer>* Histogram(grpc::CallbackServerContext* rpc,
                                                       grpc::ByteBuffer* response) override {
    return StartHistogram(ctx_, rpc, response);
  }
  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* Compact(grpc::CallbackServerContext* rpc) override {
    return StartCompact(ctx_, rpc);
  }
  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* SegmentedScan(grpc::CallbackServerContext* rpc) override {
    return StartSegmentedScan(ctx_, rpc);
  }
  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* ReduceByKey(grpc::CallbackServerContext* rpc) override {
    return StartReduceByKey(ctx_, rpc);
  }
  grpc::ServerBidiReactor<v1::SortRequest, v1::SortResponse>* Sort(grpc::CallbackServerContext* rpc) override {
    return StartSort(ctx_, rpc);
  }
  grpc::ServerBidiReactor<v1::Scan2DRequest, v1::ScanResponse>* Scan2D(grpc::CallbackServerContext* rpc) override {
    return StartScan2D(ctx_, rpc);
  }
  grpc::ServerWriteReactor<v1::BenchmarkRow>* Benchmark(grpc::CallbackServerContext*,
                                                        const v1::BenchmarkRequest* request) override {
    return StartBenchmark(ctx_, request);
  }
  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* Transport(grpc::CallbackServerContext* rpc) override {
    return StartTransport(ctx_, rpc);
  }
  grpc::ServerUnaryReactor* GetServerInfo(grpc::CallbackServerContext* rpc, const v1::GetServerInfoRequest*,
                                          v1::ServerInfo* info) override {
    FillServerInfo(ctx_, info);
    grpc::ServerUnaryReactor* reactor = rpc->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }
  grpc::ServerReadReactor<grpc::ByteBuffer>* PutArray(grpc::CallbackServerContext* rpc,
                                                      grpc::ByteBuffer* response) override {
    return StartPutArray(ctx_, rpc, response);
  }
  grpc::ServerWriteReactor<v1::GetArrayResponse>* GetArray(grpc::CallbackServerContext* rpc,
                                                           const v1::GetArrayRequest* request) override {
    return StartGetArray(ctx_, rpc, request);
  }
  grpc::ServerUnaryReactor* DropArray(grpc::CallbackServerContext* rpc, const v1::DropArrayRequest* request,
                                      v1::DropArrayResponse* response) override {
    grpc::ServerUnaryReactor* reactor = rpc->DefaultReactor();
    reactor->Finish(server::DropArray(ctx_, *rpc, *request, response));
    return reactor;
  }
  grpc::ServerUnaryReactor* ListArrays(grpc::CallbackServerContext* rpc, const v1::ListArraysRequest* request,
                                       v1::ListArraysResponse* response) override {
    grpc::ServerUnaryReactor* reactor = rpc->DefaultReactor();
    reactor->Finish(server::ListArrays(ctx_, *rpc, *request, response));
    return reactor;
  }
  grpc::ServerBidiReactor<v1::PipelineRequest, v1::PipelineResponse>* Pipeline(grpc::CallbackServerContext* rpc) override {
    return StartPipeline(ctx_, rpc);
  }

 private:
  CallContext ctx_;
};

constexpr const char* kServiceName = "gpuscan.v1.GpuScan";

ResidentOptions ResidentOptionsOf(const ServerOptions& o) {
  ResidentOptions r;
  r.budget_bytes = o.resident_bytes;
  r.tenant_quota_bytes = o.tenant_quota_bytes;
  r.spill_bytes = o.spill_bytes;
  r.max_ttl = o.resident_ttl;
  r.route = o.resident_route;
  return r;
}

class ServerImpl final : public Server {
 public:
  ServerImpl(const ServerOptions& options, std::unique_ptr<engine::Engine> engine)
      : options_(options),
        engine_(std::move(engine)),
        resident_(std::make_unique<ResidentStore>(engine_.get(), ResidentOptionsOf(options))),
        admission_(options.max_concurrent, options.max_queued, options.max_inflight_bytes),
        metrics_(*engine_, GPUSCAN_VERSION, Gauges()),
        executor_(options.workers ? options.workers : std::max(2u, std::thread::hardware_concurrency())) {
    // The metrics endpoint first: an address that cannot be bound fails before anything serves.
    if (!options_.metrics_address.empty()) {
      metrics_endpoint_ = std::make_unique<MetricsEndpoint>(options_.metrics_address, metrics_);
    }
    CallContext ctx;
    ctx.engine = engine_.get();
    ctx.executor = &executor_;
    ctx.admission = &admission_;
    ctx.options = &options_;
    ctx.metrics = &metrics_;
    ctx.on_engine_failure = [this] { CheckEngineHealth(); };
    ctx.benchmark_running = &benchmark_running_;
    ctx.lanes = &lanes_;
    if (!options_.shm_dir.empty()) {
      std::string error;
      regions_ = shm::RegionDir::Open(
          options_.shm_dir, options_.shm_pin_limit,
          [engine = engine_.get()](void* data, uint64_t bytes, bool read_only) {
            return engine->RegisterHost(data, bytes, read_only);
          },
          &error);
      if (!regions_) throw std::invalid_argument(error);
      spdlog::info("shared memory: regions under {} (up to {} bytes registered for DMA)", options_.shm_dir,
                   options_.shm_pin_limit);
    } else {
      regions_ = shm::RegionDir::Disabled();
    }
    ctx.regions = regions_.get();
    device_ipc_ = std::make_unique<IpcHandles>(engine_.get(), options_.allow_device_ipc && engine_->name() == "cuda");
    if (options_.allow_device_ipc) {
      if (device_ipc_->enabled()) {
        spdlog::info("device memory: CUDA IPC handles from callers on this host are opened (--allow-device-ipc)");
      } else {
        spdlog::warn("--allow-device-ipc has no effect on the {} engine", engine_->name());
      }
    }
    ctx.device_ipc = device_ipc_.get();
    // Blocks of the largest chunk a message may carry, registered for DMA (CUDA engine).
    payloads_ = PayloadPool::Create(options_.chunk_bytes, options_.payload_pool_bytes,
                                    [engine = engine_.get()](void* data, uint64_t bytes) {
                                      return engine->RegisterHost(data, bytes, false);
                                    });
    ctx.payloads = payloads_.get();
    ctx.resident = resident_.get();
    if (options_.resident_bytes) {
      spdlog::info("resident arrays: up to {} bytes ({} a tenant), spilling up to {} bytes, idle for at most {} ms",
                   options_.resident_bytes,
                   options_.tenant_quota_bytes ? std::to_string(options_.tenant_quota_bytes) : "no cap",
                   options_.spill_bytes, options_.resident_ttl.count());
    }
    service_ = std::make_unique<GpuScanService>(std::move(ctx));

    grpc::EnableDefaultHealthCheckService(true);
    grpc::reflection::InitProtoReflectionServerBuilderPlugin();
    grpc::ServerBuilder builder;
    const bool tls = !options_.tls_cert_file.empty();
    ConfigureListener(options_, builder, &port_);
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    if (!server_ || port_ == 0) throw std::runtime_error("cannot listen on " + options_.address);
    SetServing(engine_->healthy());
    if (options_.address.rfind("unix", 0) == 0) {
      address_ = options_.address;  // (a unix socket has no port)
    } else {
      const std::string host = options_.address.substr(0, options_.address.rfind(':'));
      address_ = host + ":" + std::to_string(port_);
    }
    if (tls) {
      spdlog::info("TLS on{}", options_.tls_client_ca_file.empty() ? "" : ", client certificates required (mutual TLS)");
    } else if (!IsLoopbackAddress(options_.address)) {
      spdlog::warn("*** {} is reachable from other machines and gpuscan-server is NOT using TLS: anyone "
                   "on the network can read and send data. Set --tls-cert/--tls-key (and --tls-client-ca "
                   "for mutual TLS), or listen on 127.0.0.1 behind a TLS-terminating proxy. ***",
                   options_.address);
    }
    if (metrics_endpoint_) spdlog::info("metrics at http://{}/metrics", metrics_endpoint_->address());
  }

  ~ServerImpl() override { Shutdown(); }

  int port() const override { return port_; }
  std::string address() const override { return address_; }
  const engine::Engine& engine() const override { return *engine_; }
  int metrics_port() const override { return metrics_endpoint_ ? metrics_endpoint_->port() : 0; }

  void Shutdown() override {
    std::call_once(shutdown_once_, [this] {
      spdlog::info("shutting down: in-flight calls have {} ms to finish", options_.shutdown_grace.count());
      SetServing(false);
      server_->Shutdown(std::chrono::system_clock::now() + options_.shutdown_grace);
      server_->Wait();
      shut_down_ = true;
      spdlog::info("shutdown complete");
    });
  }

  void Wait() override { server_->Wait(); }

 private:
  void SetServing(bool serving) {
    if (auto* health = server_->GetHealthCheckService()) {
      health->SetServingStatus(serving);
      health->SetServingStatus(kServiceName, serving);
    }
  }

  void CheckEngineHealth() {
    if (shut_down_) return;
    engine_->CheckHealth();
    ReportDrainedDevices();
    if (engine_->healthy()) return;
    if (!reported_unhealthy_.exchange(true)) {
      spdlog::error("engine {} is unhealthy, health now NOT_SERVING: {}", engine_->name(),
                    engine_->unhealthy_reason());
      if (options_.on_unhealthy) options_.on_unhealthy();
    }
    SetServing(false);
  }

  // Several devices: each one that turned unhealthy is logged once; the others go on serving.
  void ReportDrainedDevices() {
    const std::vector<engine::DeviceStatus> devices = engine_->device_status();
    if (devices.size() < 2) return;  // one device: the engine's own health says it all
    std::lock_guard<std::mutex> lock(drained_mu_);
    for (const engine::DeviceStatus& d : devices) {
      if (d.healthy || !drained_.insert(d.device).second) continue;
      spdlog::error("device {} is unhealthy and gets no more calls ({} of {} devices left): {}", d.device,
                    devices.size() - drained_.size(), devices.size(), d.reason);
    }
  }

  ServerOptions options_;
  std::unique_ptr<engine::Engine> engine_;
  // Resident arrays: after the engine in destruction (their memory is the engine's), made before
  // the metrics that read it.
  std::unique_ptr<ResidentStore> resident_;
  // Shared-memory regions (mapped, registered with the engine): after the workers in
  // destruction, as calls hold views of them; before the engine they are registered with.
  std::unique_ptr<shm::RegionDir> regions_;
  // Callers' device memory opened through CUDA IPC: like the regions, before the engine.
  std::unique_ptr<IpcHandles> device_ipc_;
  // Raw RPCs' payloads: like the regions, after the workers and before the engine. A slice gRPC
  // still holds keeps its pool (and the registration) alive past this reference.
  std::shared_ptr<PayloadPool> payloads_;

  // Read at scrape time.
  Metrics::Gauges Gauges() {
    Metrics::Gauges g{[this] { return uint64_t{admission_.active()}; }, [this] { return uint64_t{admission_.queued()}; }};
    if (options_.resident_bytes) {
      g.resident_bytes = [this] { return resident_->used_bytes(); };
      g.resident_arrays = [this] { return uint64_t{resident_->arrays()}; };
      g.resident_expired = [this] { return resident_->expired(); };
      g.resident_tenant_bytes = [this] {
        Metrics::Gauges::Labelled v;
        for (const auto& [tenant, bytes] : resident_->tenant_bytes()) v.emplace_back(tenant, bytes);
        return v;
      };
      g.resident_device_bytes = [this] {
        Metrics::Gauges::Labelled v;
        for (const auto& [device, hold] : resident_->by_device()) v.emplace_back(device, hold.bytes);
        return v;
      };
      g.resident_device_arrays = [this] {
        Metrics::Gauges::Labelled v;
        for (const auto& [device, hold] : resident_->by_device()) v.emplace_back(device, hold.arrays);
        return v;
      };
    }
    if (options_.resident_bytes && options_.spill_bytes) {
      g.resident_spilled_bytes = [this] { return resident_->spilled_bytes(); };
      g.resident_spills = [this] { return resident_->spills(); };
      g.resident_restores = [this] { return resident_->restores(); };
    }
    return g;
  }
  std::atomic<bool> benchmark_running_{false};
  // Destroyed in reverse: the metrics endpoint (its scrapes read the metrics, admission and the
  // engine), the gRPC server, the workers (which may still release admission slots), the
  // metrics calls record into, admission, then the engine they all use.
  Admission admission_;
  Metrics metrics_;
  // Striped arrays in flight. After the workers in destruction: tasks they drain may still end
  // an array (which leaves the registry and gives back its admission slot).
  LaneRegistry lanes_{&admission_, &executor_, &options_};  // (the executor is built next; used later)
  Executor executor_;
  std::unique_ptr<GpuScanService> service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  std::string address_;
  std::once_flag shutdown_once_;
  std::atomic<bool> shut_down_{false};
  std::atomic<bool> reported_unhealthy_{false};
  std::mutex drained_mu_;
  std::set<std::string> drained_;  // devices of a DeviceSet logged as unhealthy
  std::unique_ptr<MetricsEndpoint> metrics_endpoint_;
};

}  // namespace

std::unique_ptr<Server> Server::Start(const ServerOptions& options, std::unique_ptr<engine::Engine> engine) {
  return std::make_unique<ServerImpl>(options, std::move(engine));
}

}  // namespace gpuscan::server
