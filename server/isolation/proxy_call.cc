#include "service/device_memory.h"
#include "isolation/proxy_call.h"

#include <algorithm>
#include <cctype>
#include <deque>
#include <utility>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>
#include <grpcpp/client_context.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/support/proto_buffer_reader.h>
#include <spdlog/spdlog.h>

#include "gpuscan/v1/gpuscan.pb.h"
#include "service/resident_store.h"
#include "service/status.h"

namespace gpuscan::server {

int ArrayRoutes::Claim(const std::string& id, const std::function<int()>& pick) {
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = routes_.find(id); it != routes_.end()) return it->second.first;
  const int device = pick();
  if (device < 0) return device;
  routes_.emplace(id, std::make_pair(device, Clock::now()));
  if (routes_.size() > kKept) {
    auto oldest = routes_.begin();
    for (auto i = routes_.begin(); i != routes_.end(); ++i) {
      if (i->second.second < oldest->second.second) oldest = i;
    }
    routes_.erase(oldest);
  }
  return device;
}

std::string OpOfMethod(const std::string& method) {
  const std::string prefix = "/gpuscan.v1.GpuScan/";
  if (method.rfind(prefix, 0) != 0) return method;
  std::string out;
  const std::string name = method.substr(prefix.size());
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    if (std::isupper(static_cast<unsigned char>(c)) && i > 0 && std::islower(static_cast<unsigned char>(name[i - 1]))) {
      out.push_back('_');
    }
    out.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  }
  return out;  // Scan2D -> scan2d
}

void ForwardCaller(const grpc::GenericCallbackServerContext& ctx, grpc::ClientContext* up) {
  for (const auto& [key, value] : ctx.client_metadata()) {
    const std::string k(key.data(), key.size());
    if (k.empty() || k[0] == ':' || k.rfind("grpc-", 0) == 0 || k == "user-agent" || k == "content-type" ||
        k == "te" || k == kFrontTenantMetadata) {
      continue;
    }
    up->AddMetadata(k, std::string(value.data(), value.size()));
  }
  // Under mutual TLS the tenant is the certificate's, which the worker cannot see (TenantOf).
  if (const auto auth = ctx.auth_context(); auth && auth->IsPeerAuthenticated()) {
    std::string tenant;
    if (TenantOf(ctx, &tenant).ok() && !tenant.empty()) up->AddMetadata(kFrontTenantMetadata, tenant);
  }
  if (ctx.deadline() != std::chrono::system_clock::time_point::max()) up->set_deadline(ctx.deadline());
}

namespace {

namespace pb = google::protobuf;

// The request and response types of a method path ("/gpuscan.v1.GpuScan/Scan"), from the
// generated descriptors; null for a method this build does not know.
std::pair<const pb::Message*, const pb::Message*> Prototypes(const std::string& method) {
  if (method.size() < 2 || method[0] != '/') return {nullptr, nullptr};
  std::string full = method.substr(1);
  std::replace(full.begin(), full.end(), '/', '.');
  const pb::MethodDescriptor* m = pb::DescriptorPool::generated_pool()->FindMethodByName(full);
  if (!m) return {nullptr, nullptr};
  auto* factory = pb::MessageFactory::generated_factory();
  return {factory->GetPrototype(m->input_type()), factory->GetPrototype(m->output_type())};
}

std::unique_ptr<pb::Message> Parse(const pb::Message* prototype, const grpc::ByteBuffer& buffer) {
  if (!prototype) return nullptr;
  grpc::ByteBuffer copy(buffer);  // shares the slices
  grpc::ProtoBufferReader reader(&copy);
  std::unique_ptr<pb::Message> msg(prototype->New());
  if (!msg->ParseFromZeroCopyStream(&reader)) return nullptr;
  return msg;
}

// A sub-message field by name, when set.
const pb::Message* Sub(const pb::Message& msg, const char* name) {
  const pb::FieldDescriptor* f = msg.GetDescriptor()->FindFieldByName(name);
  if (!f || f->type() != pb::FieldDescriptor::TYPE_MESSAGE || f->is_repeated()) return nullptr;
  if (!msg.GetReflection()->HasField(msg, f)) return nullptr;
  return &msg.GetReflection()->GetMessage(msg, f);
}

// What the front learns from a call's first request: its header's dtype, lanes' array id, the
// device its arrays lie on (device_memory) and the resident ids it names, each with its field.
struct FirstRequest {
  std::string dtype;
  std::string array_id;
  bool device_memory = false;
  std::string device_uuid;
  std::vector<std::pair<std::string, std::string>> resident;  // (field, id)
};

// The resident ids of a first request: header.resident's inputs, GetArray's and DropArray's id, a
// Pipeline's stage inputs.
void ReadResidentIds(const pb::Message& msg, FirstRequest* out) {
  auto add = [out](std::string field, const std::string& id) {
    if (!id.empty()) out->resident.emplace_back(std::move(field), id);
  };
  if (const auto* get = dynamic_cast<const v1::GetArrayRequest*>(&msg)) {
    add("id", get->id());
    if (get->has_device_memory()) {
      out->device_memory = true;
      out->device_uuid = get->device_memory().device_uuid();
    }
    return;
  }
  if (const auto* drop = dynamic_cast<const v1::DropArrayRequest*>(&msg)) return add("id", drop->id());
  if (const auto* pipeline = dynamic_cast<const v1::PipelineRequest*>(&msg)) {
    for (int i = 0; i < pipeline->header().stages_size(); ++i) {
      const v1::PipelineStage& s = pipeline->header().stages(i);
      const std::string stage = "header.stages[" + std::to_string(i) + "].";
      for (const auto& [name, in] : {std::pair<const char*, const v1::StageInput*>{"values", &s.values()},
                                     {"flags", &s.flags()}, {"keys", &s.keys()}, {"sort_values", &s.sort_values()}}) {
        if (in->source_case() == v1::StageInput::kId) add(stage + name + ".id", in->id());
      }
    }
    return;
  }
  const pb::Message* header = Sub(msg, "header");
  const pb::Message* resident = header ? Sub(*header, "resident") : nullptr;
  if (!resident) return;
  const auto& r = static_cast<const v1::Resident&>(*resident);
  add("header.resident.values", r.values());
  add("header.resident.flags", r.flags());
  add("header.resident.keys", r.keys());
  add("header.resident.sort_values", r.sort_values());
}

FirstRequest ReadFirst(const pb::Message* prototype, const grpc::ByteBuffer& buffer) {
  FirstRequest out;
  auto msg = Parse(prototype, buffer);
  if (msg) ReadResidentIds(*msg, &out);
  const pb::Message* header = msg ? Sub(*msg, "header") : nullptr;
  if (!header) return out;
  for (const char* name : {"dtype", "key_dtype"}) {
    const pb::FieldDescriptor* f = header->GetDescriptor()->FindFieldByName(name);
    if (f && f->type() == pb::FieldDescriptor::TYPE_ENUM) {
      const pb::EnumValueDescriptor* v = header->GetReflection()->GetEnum(*header, f);
      std::string text = v->name();  // DTYPE_INT32 -> int32
      if (text.rfind("DTYPE_", 0) == 0) text = text.substr(6);
      std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::tolower(c); });
      out.dtype = text;
      break;
    }
  }
  if (const pb::Message* lanes = Sub(*header, "lanes")) {
    out.array_id = static_cast<const v1::Lanes&>(*lanes).array_id();
  }
  if (const pb::Message* device = Sub(*header, "device_memory")) {
    out.device_memory = true;
    out.device_uuid = static_cast<const v1::DeviceMemory&>(*device).device_uuid();
  }
  return out;
}

// Flow: each direction keeps one read and one write outstanding and up to kDepth messages
// between them, so reading message k + 1 overlaps writing message k.
//
// Threading: the client's and the worker's reactions run on gRPC threads, concurrently; all
// state is under mu_. Reads and writes start under it; Finish, RemoveHold and TryCancel run
// outside it (gRPC may run OnDone inline from them), with busy_ keeping the object alive.
class ProxyCall final : public grpc::ServerGenericBidiReactor {
 public:
  ProxyCall(FrontContext* front, grpc::GenericCallbackServerContext* ctx)
      : front_(front), ctx_(ctx), start_(std::chrono::steady_clock::now()) {
    std::tie(request_type_, response_type_) = Prototypes(ctx->method());
    record_.op = OpOfMethod(ctx->method());
    front_->metrics->CallStarted();
    client_reading_ = true;
    StartRead(&in_);
  }

  // A client message, or the end of them (half-close or cancel).
  void OnReadDone(bool ok) override {
    std::unique_lock<std::mutex> lock(mu_);
    Deferred d;
    client_reading_ = false;
    if (ok) {
      bytes_in_ += in_.Length();
      up_queue_.emplace_back(in_);  // shares the slices
      in_.Clear();
    } else if (ctx_->IsCancelled()) {
      // The client cancelled (or its deadline passed): that is no half-close to pass on. A
      // worker told "no more input" would finish a cut-off array as if whole (a striped one
      // fails INVALID_ARGUMENT for its missing chunks) before the cancel reached it.
      cancelled_ = true;
      if (started_) {
        d.cancel = true;
        up_failed_ = true;
      }
    } else {
      client_closed_ = true;
    }
    if (!started_ && cancelled_) {
      if (!finished_) FinishLocked(grpc::Status(grpc::StatusCode::CANCELLED, "cancelled before it reached a device"), d);
    } else if (!started_) {
      Begin(d);  // opens the worker's call (or answers here)
    } else {
      PumpUp(d);
    }
    Settle(lock, d);
  }

  // A response reached the client's stream.
  void OnWriteDone(bool ok) override {
    std::unique_lock<std::mutex> lock(mu_);
    Deferred d;
    down_write_pending_ = false;
    down_writing_.Clear();
    if (!ok) {
      // The client's stream broke: stop the worker's call too.
      down_failed_ = true;
      d.cancel = true;
      if (!worker_reading_) DropReadHold(d);
    }
    PumpDown(d);
    Settle(lock, d);
  }

  void OnCancel() override {
    std::unique_lock<std::mutex> lock(mu_);
    Deferred d;
    if (started_) {
      d.cancel = true;
    } else if (!finished_) {
      FinishLocked(grpc::Status(grpc::StatusCode::CANCELLED, "cancelled before it reached a device"), d);
    }
    Settle(lock, d);
  }

  void OnDone() override {
    std::unique_lock<std::mutex> lock(mu_);
    server_done_ = true;
    // Counted only now, when gRPC knows whether the client cancelled (CountedCode says why).
    const grpc::StatusCode code = finished_ ? finish_code_ : grpc::StatusCode::CANCELLED;
    record_.status = CodeName(CountedCode(code, ctx_->IsCancelled()));
    front_->metrics->CallDone(record_);
    MaybeDelete(lock);
  }

 private:
  static constexpr size_t kDepth = 2;  // messages held per direction beyond the one being written

  // The upstream half: the same call to the worker.
  class Upstream final : public grpc::ClientBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
   public:
    explicit Upstream(ProxyCall* call) : call_(call) {}
    void OnReadDone(bool ok) override { call_->OnWorkerMessage(ok); }
    void OnWriteDone(bool ok) override { call_->OnWorkerWriteDone(ok); }
    void OnWritesDoneDone(bool /*ok*/) override { call_->OnWorkerWritesDone(); }
    void OnDone(const grpc::Status& s) override { call_->OnWorkerDone(s); }

   private:
    ProxyCall* call_;
  };

  // What a reaction leaves to do once the lock is released.
  struct Deferred {
    std::optional<grpc::Status> finish;
    int remove_holds = 0;
    bool cancel = false;
  };

  // Runs `d` without the lock, then deletes the call if both halves are done. `lock` is
  // released on return.
  void Settle(std::unique_lock<std::mutex>& lock, Deferred& d) {
    if (d.finish || d.remove_holds > 0 || d.cancel) {
      ++busy_;
      const bool started = started_;
      lock.unlock();
      if (d.cancel && started) up_ctx_.TryCancel();
      for (int i = 0; i < d.remove_holds; ++i) up_.RemoveHold();
      if (d.finish) Finish(*d.finish);
      lock.lock();
      --busy_;
    }
    MaybeDelete(lock);
  }

  void MaybeDelete(std::unique_lock<std::mutex>& lock) {
    const bool last = server_done_ && (!started_ || upstream_done_) && busy_ == 0;
    lock.unlock();
    if (last) delete this;
  }

  static constexpr int kRefused = -2;

  // The device whose worker holds the call's resident inputs (the device in their ids:
  // ResidentStore::RouteOf); nullopt when it names no id of this front's workers (any worker then
  // refuses it by name); kRefused once the call is refused here (inputs on two devices). Lock held.
  std::optional<int> RouteResident(const FirstRequest& first, Deferred& d) {
    std::optional<int> route;
    std::string route_field;
    const std::vector<WorkerStatus> all = front_->pool->Status();
    for (const auto& [field, id] : first.resident) {
      const int r = ResidentStore::RouteOf(id);
      if (std::none_of(all.begin(), all.end(), [r](const WorkerStatus& w) { return w.device == r; })) continue;
      if (route && *route != r) {
        up_queue_.clear();
        FinishLocked(InvalidArgument(field + " " + HexText(id) + " lies on device " + std::to_string(r) + ", " +
                                     route_field + " on device " + std::to_string(*route) +
                                     ": one call reads one device (behind --isolate-devices each device's arrays "
                                     "live in its own worker process)"),
                     d);
        return kRefused;
      }
      route = r;
      route_field = field;
    }
    return route;
  }

  // The call's first event (lock held): route it and open the worker's call, or answer here.
  void Begin(Deferred& d) {
    FirstRequest first;
    if (!up_queue_.empty()) first = ReadFirst(request_type_, up_queue_.front());
    record_.dtype = first.dtype;
    std::optional<int> device;
    std::string held_by;  // the resident input that routed the call
    if (first.device_memory && !LocalPeer(ctx_->peer())) {
      // The worker sees the front as its peer: whether the caller is on this host is judged here.
      up_queue_.clear();
      FinishLocked(grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                                std::string(first.resident.empty() ? "header." : "") +
                                    "device_memory: served only to callers on this host (a unix socket or "
                                    "loopback), not to " + ctx_->peer()),
                   d);
      return;
    }
    if (auto route = RouteResident(first, d)) {
      if (*route == kRefused) return;
      // Resident arrays live in the worker of the device that issued their ids.
      device = *route;
      held_by = first.resident.front().first;
      lease_ = front_->pool->Pick(device);
    } else if (first.device_memory) {
      // To the worker of the arrays' device; an unknown device to any, which names it in its refusal.
      device = front_->device_of ? front_->device_of(first.device_uuid) : std::nullopt;
      lease_ = front_->pool->Pick(device);
    } else if (first.array_id.empty()) {
      lease_ = front_->pool->Pick();
    } else {
      // Every lane of an array to the worker its first lane went to.
      device = front_->routes->Claim(first.array_id, [&] {
        lease_ = front_->pool->Pick();
        return lease_ ? lease_->device() : -1;
      });
      if (!lease_ && *device >= 0) lease_ = front_->pool->Pick(*device);
      if (*device < 0) device.reset();
    }
    if (!lease_) {
      std::string why;
      for (const WorkerStatus& w : front_->pool->Status()) {
        if (device && w.device != *device) continue;
        why += (why.empty() ? "" : "; ") + ("device " + w.label + ": " + (w.up ? "serving" : w.reason));
      }
      up_queue_.clear();
      FinishLocked(grpc::Status(grpc::StatusCode::UNAVAILABLE,
                                !held_by.empty() ? "the device that holds " + held_by + " is not serving: " + why
                                : device         ? "the device that has this array's other lanes is not serving: " + why
                                                 : "no device is serving: " + why),
                   d);
      return;
    }
    record_.device = lease_->label();
    ForwardCaller(*ctx_, &up_ctx_);
    grpc::GenericStub stub(lease_->channel());
    stub.PrepareBidiStreamingCall(&up_ctx_, ctx_->method(), grpc::StubOptions(), &up_);
    up_.AddMultipleHolds(2);  // the write flow (client -> worker) and the read flow (worker -> client)
    write_hold_ = read_hold_ = true;
    started_ = true;
    worker_reading_ = true;
    up_.StartRead(&from_worker_);
    up_.StartCall();
    PumpUp(d);
  }

  // Client -> worker: write the next held message, half-close once the client has, and keep a
  // client read outstanding while there is room.
  void PumpUp(Deferred& d) {
    if (finished_ || up_failed_) {
      if (!up_write_pending_) DropWriteHold(d);
      return;
    }
    if (!up_write_pending_ && !up_queue_.empty()) {
      up_writing_ = up_queue_.front();
      up_queue_.pop_front();
      up_write_pending_ = true;
      up_.StartWrite(&up_writing_);
    }
    if (!up_write_pending_ && up_queue_.empty() && client_closed_ && !writes_done_) {
      writes_done_ = true;
      up_.StartWritesDone();
    }
    if (!client_reading_ && !client_closed_ && up_queue_.size() < kDepth) {
      client_reading_ = true;
      StartRead(&in_);
    }
  }

  // Worker -> client: write the next held response, and keep a worker read outstanding while
  // there is room; once the worker's stream is over and everything is written, finish.
  void PumpDown(Deferred& d) {
    if (finished_) return;
    if (!down_failed_ && !down_write_pending_ && !down_queue_.empty()) {
      down_writing_ = down_queue_.front();
      down_queue_.pop_front();
      down_write_pending_ = true;
      StartWrite(&down_writing_);
    }
    if (!down_failed_ && !worker_reading_ && !worker_closed_ && down_queue_.size() < kDepth) {
      worker_reading_ = true;
      up_.StartRead(&from_worker_);
    }
    // The worker's status is in: finish once its responses are written (an error at once).
    if (upstream_done_ && !down_write_pending_ && (down_queue_.empty() || !upstream_status_.ok() || down_failed_)) {
      FinishLocked(upstream_status_, d);
    }
  }

  void OnWorkerWriteDone(bool ok) {
    std::unique_lock<std::mutex> lock(mu_);
    Deferred d;
    up_write_pending_ = false;
    up_writing_.Clear();
    if (!ok) up_failed_ = true;  // the worker's call is ending: its status will say why
    PumpUp(d);
    Settle(lock, d);
  }

  void OnWorkerWritesDone() {
    std::unique_lock<std::mutex> lock(mu_);
    Deferred d;
    DropWriteHold(d);
    Settle(lock, d);
  }

  // A response from the worker, or the end of them.
  void OnWorkerMessage(bool ok) {
    std::unique_lock<std::mutex> lock(mu_);
    Deferred d;
    worker_reading_ = false;
    if (!ok || down_failed_ || finished_) {
      // The worker's stream is over (its status follows): nothing more goes to it either.
      worker_closed_ = true;
      DropReadHold(d);
      up_failed_ = true;
      PumpUp(d);
    } else {
      bytes_out_ += from_worker_.Length();
      last_response_ = from_worker_;  // shares the slices: the final one carries Timing
      down_queue_.emplace_back(from_worker_);
      from_worker_.Clear();
      PumpDown(d);
    }
    Settle(lock, d);
  }

  void OnWorkerDone(const grpc::Status& status) {
    std::unique_lock<std::mutex> lock(mu_);
    Deferred d;
    upstream_done_ = true;
    upstream_status_ = status;
    if (status.error_code() == grpc::StatusCode::UNAVAILABLE) suspect_ = true;
    if (!finished_) {
      for (const auto& [key, value] : up_ctx_.GetServerTrailingMetadata()) {
        const std::string k(key.data(), key.size());
        if (k.rfind("grpc-", 0) != 0) ctx_->AddTrailingMetadata(k, std::string(value.data(), value.size()));
      }
      PumpDown(d);
    }
    if (suspect_) {
      const int device = lease_->device();
      ++busy_;
      lock.unlock();
      front_->pool->Suspect(device, status.error_message());
      lock.lock();
      --busy_;
    }
    Settle(lock, d);
  }

  void DropWriteHold(Deferred& d) {
    if (!write_hold_) return;
    write_hold_ = false;
    ++d.remove_holds;
  }
  void DropReadHold(Deferred& d) {
    if (!read_hold_) return;
    read_hold_ = false;
    ++d.remove_holds;
  }

  // Ends the client's call with `status` (once the lock is released); OnDone counts it.
  void FinishLocked(const grpc::Status& status, Deferred& d) {
    if (finished_) return;
    finished_ = true;
    finish_code_ = status.error_code();
    if (status.ok()) {
      record_.bytes_in = bytes_in_;
      record_.bytes_out = bytes_out_;
      if (auto msg = Parse(response_type_, last_response_)) {
        if (const pb::Message* t = Sub(*msg, "timing")) {
          const auto& timing = static_cast<const v1::Timing&>(*t);
          record_.algorithm = timing.algorithm();
          record_.set(Stage::kReceive, timing.receive_us() * 1e-6);
          record_.set(Stage::kQueue, timing.queue_us() * 1e-6);
          if (timing.chunks() > 0) {
            record_.set(Stage::kH2d, timing.h2d_us() * 1e-6);
            record_.set(Stage::kKernel, timing.kernel_us() * 1e-6);
            record_.set(Stage::kD2h, timing.d2h_us() * 1e-6);
          }
          record_.set(Stage::kSend, timing.send_us() * 1e-6);
        }
      }
      record_.set(Stage::kTotal, std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count());
    }
    up_queue_.clear();
    down_queue_.clear();
    if (started_ && !up_write_pending_) DropWriteHold(d);
    d.finish = status;
  }

  FrontContext* const front_;
  grpc::GenericCallbackServerContext* const ctx_;
  const std::chrono::steady_clock::time_point start_;
  const pb::Message* request_type_ = nullptr;
  const pb::Message* response_type_ = nullptr;
  std::mutex mu_;
  std::unique_ptr<WorkerPool::Lease> lease_;
  grpc::ClientContext up_ctx_;
  Upstream up_{this};
  // Client -> worker.
  grpc::ByteBuffer in_, up_writing_;
  std::deque<grpc::ByteBuffer> up_queue_;
  bool client_reading_ = false, client_closed_ = false, up_write_pending_ = false, up_failed_ = false;
  bool cancelled_ = false;  // the client's call was cancelled (not half-closed)
  bool writes_done_ = false;
  // Worker -> client.
  grpc::ByteBuffer from_worker_, down_writing_, last_response_;
  std::deque<grpc::ByteBuffer> down_queue_;
  bool worker_reading_ = false, worker_closed_ = false, down_write_pending_ = false, down_failed_ = false;
  grpc::Status upstream_status_;
  uint64_t bytes_in_ = 0, bytes_out_ = 0;
  CallRecord record_;
  int busy_ = 0;               // threads running a Deferred
  bool started_ = false;       // the worker's call exists
  bool finished_ = false;      // the client's call is being finished
  grpc::StatusCode finish_code_ = grpc::StatusCode::OK;  // with this code (OnDone counts it)
  bool write_hold_ = false, read_hold_ = false;
  bool server_done_ = false, upstream_done_ = false, suspect_ = false;  // suspect_: UNAVAILABLE from the worker
};

}  // namespace

grpc::ServerGenericBidiReactor* StartProxyCall(FrontContext* front, grpc::GenericCallbackServerContext* ctx) {
  if (front->local) {
    if (auto* local = front->local(ctx)) return local;
  }
  return new ProxyCall(front, ctx);
}

}  // namespace gpuscan::server
