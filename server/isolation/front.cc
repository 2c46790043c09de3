#include "isolation/front.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <set>
#include <stdexcept>

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/support/proto_buffer_reader.h>
#include <grpcpp/support/proto_buffer_writer.h>
#include <spdlog/spdlog.h>

#include "gpuscan/client.h"
#include "gpuscan/v1/gpuscan.grpc.pb.h"
#include "gpuscan/v1/gpuscan.pb.h"
#include "isolation/proxy_call.h"
#include "service/resident_store.h"
#include "metrics/endpoint.h"
#include "metrics/metrics.h"
#include "service/executor.h"

namespace gpuscan::server {
namespace {

constexpr const char* kServiceName = "gpuscan.v1.GpuScan";
constexpr const char* kInfoMethod = "/gpuscan.v1.GpuScan/GetServerInfo";
constexpr const char* kBenchmarkMethod = "/gpuscan.v1.GpuScan/Benchmark";
constexpr const char* kListArraysMethod = "/gpuscan.v1.GpuScan/ListArrays";

// The devices as the front sees them, for its metrics (gpuscan_device_healthy{device}, ...): an
// Engine that only describes; the front never computes.
class WorkerDevices final : public engine::Engine {
 public:
  explicit WorkerDevices(WorkerPool* pool) : pool_(pool) {}
  std::string name() const override { return "cuda"; }
  std::string device_name() const override {
    const auto all = pool_->Status();
    std::string out = std::to_string(all.size()) + " devices in worker processes:";
    for (size_t i = 0; i < all.size(); ++i) out += (i ? ", " : " ") + all[i].label;
    return out;
  }
  std::vector<engine::DeviceInfo> devices() const override { return {}; }
  std::vector<engine::ScanAlgorithm> scan_algorithms() const override { return {}; }
  std::vector<std::string> reduce_algorithms() const override { return {}; }
  std::vector<std::string> compact_algorithms() const override { return {}; }
  bool healthy() const override { return pool_->any_up(); }
  std::vector<engine::DeviceStatus> device_status() const override {
    std::vector<engine::DeviceStatus> out;
    for (const WorkerStatus& w : pool_->Status()) {
      out.push_back({w.label, w.up, w.reason, w.open_calls, std::nullopt});
    }
    return out;
  }
  std::unique_ptr<engine::ScanSession> NewScan(const engine::ScanSpec&) override { return Never<engine::ScanSession>(); }
  std::unique_ptr<engine::ReduceSession> NewReduce(const engine::ReduceSpec&) override {
    return Never<engine::ReduceSession>();
  }
  std::unique_ptr<engine::CompactSession> NewCompact(const engine::CompactSpec&) override {
    return Never<engine::CompactSession>();
  }

 private:
  template <class S>
  static std::unique_ptr<S> Never() {
    throw engine::Error(engine::ErrorCode::kUnimplemented, "the front of worker processes computes nothing itself");
  }
  WorkerPool* pool_;
};

// A call the front answers itself (GetServerInfo, Benchmark): its one request is read here,
// the work runs on the front's executor (it waits on workers), and responses are written one
// at a time.
class LocalCall final : public grpc::ServerGenericBidiReactor {
 public:
  using Work = std::function<grpc::Status(LocalCall& call, const grpc::ByteBuffer& request)>;

  LocalCall(Executor* executor, Work work) : executor_(executor), work_(std::move(work)) { StartRead(&request_); }

  // Writes one response and waits until it is on its way; false when the client is gone.
  bool Write(const google::protobuf::Message& msg) {
    grpc::ByteBuffer buffer;
    bool own = false;
    if (!grpc::SerializationTraits<google::protobuf::Message>::Serialize(msg, &buffer, &own).ok()) return false;
    std::unique_lock<std::mutex> lock(mu_);
    if (cancelled_) return false;
    writing_ = true;
    StartWrite(&buffer);
    cv_.wait(lock, [this] { return !writing_; });
    return write_ok_ && !cancelled_;
  }
  bool cancelled() {
    std::lock_guard<std::mutex> lock(mu_);
    return cancelled_;
  }
  // Called with the current canceller (or an empty one): run on OnCancel.
  void SetCanceller(std::function<void()> fn) {
    std::lock_guard<std::mutex> lock(mu_);
    canceller_ = std::move(fn);
  }

  void OnReadDone(bool ok) override {
    if (!ok) return Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "no request message"));
    executor_->Post([this] {
      const grpc::Status status = work_(*this, request_);
      Finish(status);
    });
  }
  void OnWriteDone(bool ok) override {
    std::lock_guard<std::mutex> lock(mu_);
    writing_ = false;
    write_ok_ = ok;
    cv_.notify_all();
  }
  void OnCancel() override {
    std::function<void()> fn;
    {
      std::lock_guard<std::mutex> lock(mu_);
      cancelled_ = true;
      fn = canceller_;
      cv_.notify_all();
    }
    if (fn) fn();
  }
  void OnDone() override { delete this; }

 private:
  Executor* executor_;
  Work work_;
  grpc::ByteBuffer request_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool writing_ = false, write_ok_ = true, cancelled_ = false;
  std::function<void()> canceller_;
};

template <class Msg>
bool ParseBuffer(const grpc::ByteBuffer& buffer, Msg* msg) {
  grpc::ByteBuffer copy(buffer);
  grpc::ProtoBufferReader reader(&copy);
  return msg->ParseFromZeroCopyStream(&reader);
}

class FrontService final : public grpc::CallbackGenericService {
 public:
  explicit FrontService(FrontContext* ctx) : ctx_(ctx) {}
  grpc::ServerGenericBidiReactor* CreateReactor(grpc::GenericCallbackServerContext* ctx) override {
    return StartProxyCall(ctx_, ctx);
  }

 private:
  FrontContext* ctx_;
};

class FrontImpl final : public Front {
 public:
  FrontImpl(const ServerOptions& options, WorkerPoolOptions pool_options, std::chrono::milliseconds ready_wait)
      : options_(options),
        pool_(std::move(pool_options)),
        devices_(&pool_),
        metrics_(devices_, GPUSCAN_VERSION, {}),
        executor_(4) {
    if (!options_.metrics_address.empty()) {
      metrics_endpoint_ = std::make_unique<MetricsEndpoint>(options_.metrics_address, metrics_);
    }
    pool_.Start();
    if (!pool_.WaitAllUp(ready_wait)) {
      for (const WorkerStatus& w : pool_.Status()) {
        if (!w.up) spdlog::warn("device {} is not serving yet: {}", w.label, w.reason);
      }
    }
    ctx_.pool = &pool_;
    ctx_.metrics = &metrics_;
    ctx_.routes = &routes_;
    bool any = false;
    Query(&any);  // learns each device's UUID, for calls on device memory
    ctx_.device_of = [this](const std::string& uuid) { return DeviceOf(uuid); };
    ctx_.local = [this](grpc::GenericCallbackServerContext* ctx) -> grpc::ServerGenericBidiReactor* {
      if (ctx->method() == kInfoMethod) {
        return new LocalCall(&executor_, [this](LocalCall& call, const grpc::ByteBuffer&) { return Info(call); });
      }
      if (ctx->method() == kListArraysMethod) {
        return new LocalCall(&executor_, [this, ctx](LocalCall& call, const grpc::ByteBuffer& request) {
          return ListArrays(call, request, *ctx);
        });
      }
      if (ctx->method() == kBenchmarkMethod) {
        return new LocalCall(&executor_, [this, ctx](LocalCall& call, const grpc::ByteBuffer& request) {
          return Benchmark(call, request, ctx->deadline());
        });
      }
      return nullptr;
    };
    service_ = std::make_unique<FrontService>(&ctx_);

    grpc::EnableDefaultHealthCheckService(true);
    grpc::reflection::InitProtoReflectionServerBuilderPlugin();
    grpc::ServerBuilder builder;
    ConfigureListener(options_, builder, &port_);
    builder.RegisterCallbackGenericService(service_.get());
    server_ = builder.BuildAndStart();
    if (!server_ || port_ == 0) throw std::runtime_error("cannot listen on " + options_.address);
    pool_.OnChange([this] { SetServing(pool_.any_up()); });
    SetServing(pool_.any_up());
    address_ = options_.address.substr(0, options_.address.rfind(':')) + ":" + std::to_string(port_);
    if (options_.tls_cert_file.empty() && !IsLoopbackAddress(options_.address)) {
      spdlog::warn("*** {} is reachable from other machines and gpuscan-server is NOT using TLS: anyone "
                   "on the network can read and send data. Set --tls-cert/--tls-key. ***",
                   options_.address);
    }
    if (metrics_endpoint_) spdlog::info("metrics at http://{}/metrics", metrics_endpoint_->address());
  }

  ~FrontImpl() override { Shutdown(); }

  std::string address() const override { return address_; }
  int metrics_port() const override { return metrics_endpoint_ ? metrics_endpoint_->port() : 0; }
  WorkerPool& pool() override { return pool_; }

  void Shutdown() override {
    std::call_once(shutdown_once_, [this] {
      spdlog::info("shutting down: in-flight calls have {} ms to finish", options_.shutdown_grace.count());
      shutting_down_ = true;
      SetServing(false);
      server_->Shutdown(std::chrono::system_clock::now() + options_.shutdown_grace);
      server_->Wait();
      pool_.Stop(std::chrono::milliseconds(1000));
      spdlog::info("shutdown complete");
    });
  }

 private:
  void SetServing(bool serving) {
    if (!server_) return;
    serving = serving && !shutting_down_;
    if (auto* health = server_->GetHealthCheckService()) {
      health->SetServingStatus(serving);
      health->SetServingStatus(kServiceName, serving);
    }
  }

  // A serving worker's GetServerInfo; every serving worker describes its own device into
  // known_devices_ on the way. *have: some worker answered.
  v1::ServerInfo Query(bool* have) {
    v1::ServerInfo merged;
    for (const WorkerStatus& w : pool_.Status()) {
      auto lease = w.up ? pool_.Pick(w.device) : nullptr;
      if (!lease) continue;
      try {
        const v1::ServerInfo info = lease->control().Info();
        if (!*have) merged = info;
        *have = true;
        for (const v1::Device& d : info.devices()) {
          if (d.ordinal() == w.device) {
            std::lock_guard<std::mutex> lock(mu_);
            known_devices_[w.device] = d;
          }
        }
      } catch (const RpcError& e) {
        spdlog::warn("device {}: GetServerInfo failed: {}", w.label, e.what());
      }
    }
    return merged;
  }

  std::optional<int> DeviceOf(const std::string& uuid) {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [ordinal, d] : known_devices_) {
      if (d.uuid() == uuid) return ordinal;
    }
    return std::nullopt;
  }

  // GetServerInfo: a serving worker's answer, with every device of the front (each worker
  // describes its own; a device whose worker is down keeps its last description).
  grpc::Status Info(LocalCall& call) {
    bool have = false;
    v1::ServerInfo merged = Query(&have);
    if (!have) return {grpc::StatusCode::UNAVAILABLE, "no device is serving"};
    merged.clear_devices();
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (const auto& [ordinal, d] : known_devices_) *merged.add_devices() = d;
    }
    if (!call.Write(merged)) return {grpc::StatusCode::CANCELLED, "the client went away"};
    return grpc::Status::OK;
  }

  // ListArrays: the caller's arrays device by device (each worker's oldest first), a page at a
  // time: a page takes the current device's worker's page and, when that worker has no more, goes
  // on to the next devices' until it is full. The front's token is "d<device>.<that worker's
  // token>" ("" for the first page). The byte counts are every serving worker's, summed (workers
  // not paged are asked for a page of one, for their counts); the quota is each device's. A worker
  // that fails the call (no resident arrays, a bad tenant or token) fails it with its status.
  grpc::Status ListArrays(LocalCall& call, const grpc::ByteBuffer& buffer, const grpc::GenericCallbackServerContext& ctx) {
    v1::ListArraysRequest request;
    if (!ParseBuffer(buffer, &request)) return {grpc::StatusCode::INVALID_ARGUMENT, "malformed ListArraysRequest"};
    std::vector<WorkerStatus> workers = pool_.Status();
    std::sort(workers.begin(), workers.end(), [](const auto& a, const auto& b) { return a.device < b.device; });
    int from = workers.empty() ? 0 : workers.front().device;  // the device the page starts on
    std::string inner;                                         // and its worker's token
    if (!request.page_token().empty()) {
      const std::string& t = request.page_token();
      const size_t dot = t.find('.');
      const std::string digits = dot == std::string::npos ? "" : t.substr(1, dot - 1);
      if (t[0] != 'd' || digits.empty() || digits.size() > 3 || digits.find_first_not_of("0123456789") != std::string::npos) {
        return {grpc::StatusCode::INVALID_ARGUMENT, "page_token \"" + t.substr(0, 64) +
                                                        "\" is not a token this server issued (pass a "
                                                        "ListArraysResponse.next_page_token, or none for the first page)"};
      }
      from = std::stoi(digits);
      inner = t.substr(dot + 1);
    }
    uint64_t room = request.page_size() == 0 ? server::ResidentStore::kListPageDefault
                                             : std::min<uint32_t>(request.page_size(), server::ResidentStore::kListPageMax);
    v1::ListArraysResponse merged;
    bool any = false, paging = false;
    for (const WorkerStatus& w : workers) {
      auto lease = w.up ? pool_.Pick(w.device) : nullptr;
      if (!lease) continue;
      // Before the page's device, or once the page is full: a page of one for the counts.
      const bool fills = w.device >= from && room > 0 && merged.next_page_token().empty();
      v1::ListArraysRequest one_request;
      one_request.set_page_size(fills ? static_cast<uint32_t>(room) : 1);
      if (fills && w.device == from) one_request.set_page_token(inner);
      grpc::ClientContext up;
      ForwardCaller(ctx, &up);
      call.SetCanceller([&up] { up.TryCancel(); });
      v1::ListArraysResponse one;
      const grpc::Status s = v1::GpuScan::NewStub(lease->channel())->ListArrays(&up, one_request, &one);
      call.SetCanceller(nullptr);
      if (!s.ok()) return s;
      if (fills) {
        paging = true;
        room -= std::min<uint64_t>(room, one.arrays_size());
        for (v1::ArrayInfo& a : *one.mutable_arrays()) *merged.add_arrays() = std::move(a);
        if (!one.next_page_token().empty()) {
          merged.set_next_page_token("d" + std::to_string(w.device) + "." + one.next_page_token());
        }
      } else if (w.device > from && merged.next_page_token().empty() && paging) {
        merged.set_next_page_token("d" + std::to_string(w.device) + ".");  // the page filled before this device
      }
      merged.set_tenant_bytes(merged.tenant_bytes() + one.tenant_bytes());
      merged.set_tenant_quota_bytes(one.tenant_quota_bytes());
      merged.set_budget_bytes(merged.budget_bytes() + one.budget_bytes());
      merged.set_used_bytes(merged.used_bytes() + one.used_bytes());
      merged.set_spill_bytes(merged.spill_bytes() + one.spill_bytes());
      merged.set_spilled_bytes(merged.spilled_bytes() + one.spilled_bytes());
      any = true;
    }
    if (!any) return {grpc::StatusCode::UNAVAILABLE, "no device is serving"};
    if (!call.Write(merged)) return {grpc::StatusCode::CANCELLED, "the client went away"};
    return grpc::Status::OK;
  }

  // Benchmark: each named device's worker runs the suite, one after the other.
  grpc::Status Benchmark(LocalCall& call, const grpc::ByteBuffer& buffer,
                         std::chrono::system_clock::time_point deadline) {
    v1::BenchmarkRequest request;
    if (!ParseBuffer(buffer, &request)) return {grpc::StatusCode::INVALID_ARGUMENT, "malformed BenchmarkRequest"};
    const std::vector<WorkerStatus> all = pool_.Status();
    std::vector<int> devices(request.devices().begin(), request.devices().end());
    std::string served;
    for (const WorkerStatus& w : all) served += (served.empty() ? "" : ", ") + std::to_string(w.device);
    if (devices.empty()) devices.push_back(std::min_element(all.begin(), all.end(), [](auto& a, auto& b) {
                                             return a.device < b.device;
                                           })->device);
    // The plain server's checks and messages (benchmark_handler.cc ResolveDevices).
    std::set<int> seen;
    for (int i = 0; i < request.devices_size(); ++i) {
      const int d = request.devices(i);
      const std::string what = "devices[" + std::to_string(i) + "]=" + std::to_string(d);
      if (std::none_of(all.begin(), all.end(), [d](const WorkerStatus& w) { return w.device == d; })) {
        return {grpc::StatusCode::INVALID_ARGUMENT, what + " is not a device this server serves (it serves " +
                                                        served + ")"};
      }
      if (!seen.insert(d).second) return {grpc::StatusCode::INVALID_ARGUMENT, what + " is named twice"};
    }
    if (benchmark_running_.exchange(true)) {
      return {grpc::StatusCode::RESOURCE_EXHAUSTED, "a Benchmark is already running on this server; retry later"};
    }
    grpc::Status status = grpc::Status::OK;
    for (const int d : devices) {
      auto lease = pool_.Pick(d);
      if (!lease) {
        status = {grpc::StatusCode::UNAVAILABLE, "devices: " + std::to_string(d) + " is not serving now"};
        break;
      }
      ClientOptions co;
      co.target = lease->address();
      if (deadline != std::chrono::system_clock::time_point::max()) {
        co.timeout = std::max(std::chrono::milliseconds(1), std::chrono::duration_cast<std::chrono::milliseconds>(
                                                                deadline - std::chrono::system_clock::now()));
      }
      auto worker = std::make_shared<Client>(co);
      call.SetCanceller([worker] { worker->CancelCalls(); });
      v1::BenchmarkRequest one = request;
      if (!request.devices().empty()) {  // (none: the worker's one device, as a plain server's first)
        one.clear_devices();
        one.add_devices(d);
      }
      try {
        if (call.cancelled()) throw RpcError(grpc::StatusCode::CANCELLED, "cancelled");
        worker->Benchmark(one, [&call](const v1::BenchmarkRow& row) {
          if (!call.Write(row)) throw RpcError(grpc::StatusCode::CANCELLED, "the client went away");
        });
      } catch (const RpcError& e) {
        status = grpc::Status(e.code(), e.message());
      }
      call.SetCanceller(nullptr);
      if (!status.ok()) break;
    }
    benchmark_running_ = false;
    return status;
  }

  ServerOptions options_;
  WorkerPool pool_;
  WorkerDevices devices_;
  Metrics metrics_;
  ArrayRoutes routes_;
  Executor executor_;
  FrontContext ctx_;
  std::unique_ptr<FrontService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<MetricsEndpoint> metrics_endpoint_;
  int port_ = 0;
  std::string address_;
  std::once_flag shutdown_once_;
  std::atomic<bool> shutting_down_{false};
  std::atomic<bool> benchmark_running_{false};
  std::mutex mu_;
  std::map<int, v1::Device> known_devices_;
};

}  // namespace

std::unique_ptr<Front> Front::Start(const ServerOptions& options, WorkerPoolOptions pool,
                                    std::chrono::milliseconds ready_wait) {
  return std::make_unique<FrontImpl>(options, std::move(pool), ready_wait);
}

}  // namespace gpuscan::server
