// The resident arrays' own RPCs: PutArray (client streaming, a StreamingCall like Reduce: admitted,
// in order, back-pressured), GetArray (a write reactor reading the array back chunk by chunk),
// DropArray and ListArrays (unary). The operations' header.resident: resident_call.h.
#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "service/device_memory.h"
#include "service/handlers.h"
#include "service/raw_wire.h"
#include "service/resident_call.h"
#include "service/resident_store.h"
#include "service/shared_memory.h"
#include "service/status.h"
#include "service/streaming_call.h"

namespace gpuscan::server {
namespace {

inline constexpr char kPutRequest[] = "the PutArrayRequest";
using PutChunk = RawChunk<v1::PutArrayRequest>;
using PutWire = RawWire<PutChunk, v1::ArrayInfo, kPutRequest, v1::ArrayInfo>;

// The chunks go straight into the array's memory when the header declares the element count
// (allocated once admitted); otherwise they are held until the end, when the size is known.
class PutCall final
    : public StreamingCall<PutChunk, v1::ArrayInfo, grpc::ServerReadReactor<grpc::ByteBuffer>, PutWire> {
 public:
  PutCall(CallContext ctx, grpc::CallbackServerContext* rpc, grpc::ByteBuffer* response)
      : StreamingCall(std::move(ctx), rpc, "put_array"),
        wire_response_(response),
        checks_(*ctx_.resident, ctx_.options->chunk_bytes) {}

 protected:
  // The checks: resident_call.h's PutChecks (the request fuzzer runs the same); then the caller's
  // shared or device memory, when the array comes from there.
  grpc::Status OnHeader(const v1::PutArrayHeader& header) override {
    if (auto s = checks_.Header(header, *rpc_, &tenant_); !s.ok()) return s;
    if (!header.has_shared_memory() && !header.has_device_memory()) return grpc::Status::OK;
    SharedNeeds needs;
    needs.rpc = "PutArray";
    const std::optional<uint64_t> count = DeclaredCount(header);
    if (header.has_device_memory()) {
      return OpenDevice(*ctx_.device_ipc, Peer(), header.device_memory(), header.has_shared_memory(),
                        checks_.element_size(), needs, count, &device_.emplace());
    }
    return OpenShared(*ctx_.regions, header.shared_memory(), checks_.element_size(), needs, count, 0,
                      &shared_.emplace());
  }

  grpc::Status CheckRequest(const PutChunk& req, uint64_t index) override {
    if (shared_) return NoInlinePayload(req.data.size(), "data", index);
    if (device_) return NoInlinePayload(req.data.size(), "data", index, "header.device_memory");
    return checks_.Chunk(req.data.size(), index);
  }

  // Not even when the array comes from the caller's memory: the stream is read to its end so
  // that data in a request after the header is refused (CheckRequest), not left unread while
  // the call answers OK (it did: the matrix's PutArray_ShmWithDataChunk).
  bool HeaderEndsStream() const override { return false; }
  void ReleaseHeld() override { memory_.reset(); }  // a failed Put's memory

  void Open() override {
    const v1::PutArrayHeader& header = checks_.header();
    if (!header.has_element_count() || shared_ || device_) return;
    if (auto s = ctx_.resident->Allocate(tenant_, header.element_count() * checks_.element_size(), &memory_); !s.ok()) {
      throw engine::Error(engine::ErrorCode::kResourceExhausted, s.error_message());
    }
  }

  void Process(PutChunk& req, std::vector<v1::ArrayInfo>&) override {
    const uint64_t bytes = req.data.size();
    if (bytes == 0) return;
    if (memory_) {
      memory_->Write(written_, req.data.data(), bytes);
    } else {
      held_.push_back(std::move(req.data));
    }
    written_ += bytes;
    bytes_in_ += bytes;
    ++chunks_;
  }

  grpc::Status Complete(std::vector<v1::ArrayInfo>&) override {
    if (shared_ || device_) {
      if (auto s = CopyIn(); !s.ok()) return s;
    } else if (auto s = checks_.Finish(written_); !s.ok()) {
      return s;
    }
    if (!memory_) {
      if (auto s = ctx_.resident->Allocate(tenant_, written_, &memory_); !s.ok()) return s;
      uint64_t at = 0;
      for (Payload& p : held_) {
        memory_->Write(at, p.data(), p.size());
        at += p.size();
      }
      held_.clear();
    }
    const v1::PutArrayHeader& header = checks_.header();
    const v1::ArrayInfo info = ctx_.resident->Add(tenant_, header.dtype(), written_ / checks_.element_size(),
                                                  std::move(memory_), header.ttl_ms(), header.label());
    device_name_ = info.device();
    *wire_response_ = EncodeMessage(info);
    return grpc::Status::OK;
  }

  // The whole array from the caller's memory in one copy (the engine's: DMA from a registered
  // region, device to device from IPC memory); a region cut short meanwhile fails the call.
  grpc::Status CopyIn() {
    const std::byte* from = shared_ ? shared_->in.data() : device_->in;
    written_ = shared_ ? shared_->in.bytes() : device_->elements * checks_.element_size();
    if (auto s = ctx_.resident->Allocate(tenant_, std::max<uint64_t>(written_, 1), &memory_); !s.ok()) return s;
    if (written_ > 0) memory_->Write(0, from, written_);
    bytes_in_ = written_;
    ++chunks_;
    return shared_ ? CheckIntact(*shared_) : grpc::Status::OK;
  }

  std::string LogFields() const override {
    const v1::PutArrayHeader& header = checks_.header();
    return fmt::format("dtype={} n={} label={}", v1::DType_Name(header.dtype()),
                       written_ / std::max<size_t>(checks_.element_size(), 1),
                       header.label());
  }

  MetricLabels Labels() const override { return {v1::DType_Name(checks_.header().dtype()), "", device_name_}; }

 private:
  grpc::ByteBuffer* wire_response_;  // gRPC's
  PutChecks checks_;                 // the header once accepted, and the bytes checked (gRPC thread)
  std::string tenant_;
  uint64_t written_ = 0;  // bytes processed (worker)
  std::shared_ptr<engine::ResidentMemory> memory_;
  std::vector<Payload> held_;  // no declared count: the chunks until the end
  std::string device_name_;
  std::optional<SharedRanges> shared_;  // header.shared_memory: the caller's region
  std::optional<DeviceRanges> device_;  // header.device_memory: the caller's allocation
};

// GetArray: one chunk read from the array's memory per write, the next once gRPC has sent it.
class GetReactor final : public grpc::ServerWriteReactor<v1::GetArrayResponse> {
 public:
  GetReactor(const CallContext& ctx, grpc::CallbackServerContext* rpc, const v1::GetArrayRequest& request) {
    grpc::Status s = Start(ctx, *rpc, request);
    if (!s.ok()) {
      Finish(s);
      return;
    }
    Next();
  }
  void OnWriteDone(bool ok) override {
    if (!ok) return Finish(grpc::Status(grpc::StatusCode::CANCELLED, "the client went away"));
    Next();
  }
  void OnDone() override { delete this; }

 private:
  grpc::Status Start(const CallContext& ctx, grpc::CallbackServerContext& rpc, const v1::GetArrayRequest& request) {
    std::string tenant;
    if (auto s = TenantOf(rpc, &tenant); !s.ok()) return s;
    if (auto s = ctx.resident->Find(tenant, request.id(), "id", &array_); !s.ok()) return s;
    if (auto s = PlanGet(request, *array_, ctx.options->chunk_bytes, &range_); !s.ok()) return s;
    next_ = range_.first;
    info_ = ctx.resident->Info(*array_);
    if (request.has_shared_memory() || request.has_device_memory()) return CopyOut(ctx, rpc, request);
    return grpc::Status::OK;
  }

  // The range into the caller's shared or device memory in one copy, checked as an in-place
  // Scan's output (the range's byte count declared); the one response then carries no data.
  grpc::Status CopyOut(const CallContext& ctx, grpc::CallbackServerContext& rpc, const v1::GetArrayRequest& request) {
    grpc::Status s = OpenAndCopy(ctx, rpc, request);
    return s.ok() ? s : GetArrayFieldNames(s);
  }

  grpc::Status OpenAndCopy(const CallContext& ctx, grpc::CallbackServerContext& rpc, const v1::GetArrayRequest& request) {
    SharedNeeds needs;
    needs.scan_output = true;  // written in place: the named range is the destination
    needs.rpc = "GetArray";
    const uint64_t count = range_.end - range_.first, bytes = count * range_.element_size;
    if (auto s = CheckGetArrayMemory(request, range_); !s.ok()) return s;
    std::byte* to = nullptr;
    std::optional<SharedRanges> shared;
    std::optional<DeviceRanges> device;
    if (request.has_device_memory()) {
      if (auto s = OpenDevice(*ctx.device_ipc, rpc.peer(), request.device_memory(), request.has_shared_memory(),
                              range_.element_size, needs, count, &device.emplace());
          !s.ok()) {
        return s;
      }
      to = device->out;
    } else {
      if (auto s = OpenShared(*ctx.regions, request.shared_memory(), range_.element_size, needs, count, 0,
                              &shared.emplace());
          !s.ok()) {
        return s;
      }
      to = shared->out.data();
    }
    try {
      if (bytes > 0) array_->memory->Read(range_.first * range_.element_size, to, bytes);
    } catch (const engine::Error& e) {
      return ToStatus(e);
    }
    if (shared) {
      if (auto s = CheckIntact(*shared); !s.ok()) return s;
    }
    copied_ = true;
    array_.reset();
    return grpc::Status::OK;
  }

  void Next() {
    if (copied_) {  // the range went into the caller's memory: one response, the info alone
      copied_ = false;
      *response_.mutable_info() = info_;
      response_.set_offset(range_.first);
      return StartWriteAndFinish(&response_, grpc::WriteOptions(), grpc::Status::OK);
    }
    const uint64_t end = range_.end, size = range_.element_size;
    if (next_ == end && next_ != range_.first) return Finish(grpc::Status::OK);
    response_.Clear();
    if (next_ == range_.first) *response_.mutable_info() = info_;
    const uint64_t n = std::min(range_.step, end - next_);
    std::string* data = response_.mutable_data();
    data->resize(n * size);
    try {
      array_->memory->Read(next_ * size, data->data(), n * size);
    } catch (const engine::Error& e) {
      return Finish(ToStatus(e));
    }
    response_.set_offset(next_);
    next_ += n;
    if (next_ == end) {
      // All read: let the array go now, not at OnDone (which may come after the client has
      // moved on), so that a spill looking for room does not find it held.
      array_.reset();
      return StartWriteAndFinish(&response_, grpc::WriteOptions(), grpc::Status::OK);
    }
    StartWrite(&response_);
  }

  std::shared_ptr<const ResidentArray> array_;  // held until its last piece is read
  v1::ArrayInfo info_;
  v1::GetArrayResponse response_;
  GetRange range_;
  uint64_t next_ = 0;  // the next element to send
  bool copied_ = false;  // the range was copied into the caller's memory (CopyOut)
};

}  // namespace

grpc::ServerReadReactor<grpc::ByteBuffer>* StartPutArray(CallContext ctx, grpc::CallbackServerContext* rpc,
                                                         grpc::ByteBuffer* response) {
  return StartCall<PutCall>(std::move(ctx), rpc, response);
}

grpc::ServerWriteReactor<v1::GetArrayResponse>* StartGetArray(const CallContext& ctx, grpc::CallbackServerContext* rpc,
                                                              const v1::GetArrayRequest* request) {
  return new GetReactor(ctx, rpc, *request);
}

grpc::Status DropArray(const CallContext& ctx, const grpc::CallbackServerContext& rpc,
                       const v1::DropArrayRequest& request, v1::DropArrayResponse* response) {
  std::string tenant;
  if (auto s = TenantOf(rpc, &tenant); !s.ok()) return s;
  return ctx.resident->Drop(tenant, request.id(), response->mutable_info());
}

grpc::Status ListArrays(const CallContext& ctx, const grpc::CallbackServerContext& rpc, const v1::ListArraysRequest& request,
                        v1::ListArraysResponse* response) {
  if (auto s = ctx.resident->CheckServed(); !s.ok()) return s;
  std::string tenant;
  if (auto s = TenantOf(rpc, &tenant); !s.ok()) return s;
  return ctx.resident->List(tenant, request.page_size(), request.page_token(), response);
}

}  // namespace gpuscan::server
