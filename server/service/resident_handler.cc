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

#include "service/handlers.h"
#include "service/raw_wire.h"
#include "service/resident_call.h"
#include "service/resident_store.h"
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
  // The checks: resident_call.h's PutChecks (the request fuzzer runs the same).
  grpc::Status OnHeader(const v1::PutArrayHeader& header) override { return checks_.Header(header, *rpc_, &tenant_); }

  grpc::Status CheckRequest(const PutChunk& req, uint64_t index) override {
    return checks_.Chunk(req.data.size(), index);
  }

  void Open() override {
    const v1::PutArrayHeader& header = checks_.header();
    if (!header.has_element_count()) return;
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
    if (auto s = checks_.Finish(written_); !s.ok()) return s;
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
    device_ = info.device();
    *wire_response_ = EncodeMessage(info);
    return grpc::Status::OK;
  }

  std::string LogFields() const override {
    const v1::PutArrayHeader& header = checks_.header();
    return fmt::format("dtype={} n={} label={}", v1::DType_Name(header.dtype()),
                       written_ / std::max<size_t>(checks_.element_size(), 1),
                       header.label());
  }

  MetricLabels Labels() const override { return {v1::DType_Name(checks_.header().dtype()), "", device_}; }

 private:
  grpc::ByteBuffer* wire_response_;  // gRPC's
  PutChecks checks_;                 // the header once accepted, and the bytes checked (gRPC thread)
  std::string tenant_;
  uint64_t written_ = 0;  // bytes processed (worker)
  std::shared_ptr<engine::ResidentMemory> memory_;
  std::vector<Payload> held_;  // no declared count: the chunks until the end
  std::string device_;
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
    return grpc::Status::OK;
  }

  void Next() {
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

grpc::Status ListArrays(const CallContext& ctx, const grpc::CallbackServerContext& rpc, v1::ListArraysResponse* response) {
  if (auto s = ctx.resident->CheckServed(); !s.ok()) return s;
  std::string tenant;
  if (auto s = TenantOf(rpc, &tenant); !s.ok()) return s;
  ctx.resident->List(tenant, response);
  return grpc::Status::OK;
}

}  // namespace gpuscan::server
