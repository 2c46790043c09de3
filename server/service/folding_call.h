// FoldingCall: a client-streaming call that folds every chunk into one engine session and sends
// one response when the call finishes (Reduce, Histogram). StreamingCall runs the call; this layer
// keeps the part those two share: feeding whole chunks to the session, the one encoded response
// gRPC sends at Finish, and the metric labels. A handler opens the session and fills the response.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "engine/engine.h"
#include "service/narrow.h"
#include "service/streaming_call.h"
#include "service/wire.h"

namespace gpuscan::server {

template <class Chunk, class Response, class Session, class Wire>
class FoldingCall : public StreamingCall<Chunk, Response, grpc::ServerReadReactor<grpc::ByteBuffer>, Wire> {
  using Base = StreamingCall<Chunk, Response, grpc::ServerReadReactor<grpc::ByteBuffer>, Wire>;

 public:
  FoldingCall(CallContext ctx, grpc::CallbackServerContext* rpc, grpc::ByteBuffer* response, const char* op_name)
      : Base(std::move(ctx), rpc, op_name), wire_response_(response) {}

 protected:
  void Process(Chunk& req, std::vector<Response>&) override { Fold(req.data.data(), req.data.size()); }

  // Hands `bytes` of whole elements to the session and counts them; a narrow input's are widened
  // into the engine's dtype first (service/narrow.h).
  void Fold(const void* in, size_t bytes) {
    if (bytes == 0) return;
    const uint64_t n = bytes / WireSize(narrow_, dtype_);
    Payload wide;
    session_->Process(EngineElements(narrow_, dtype_, in, n, *this->ctx_.payloads, &wide), n, this->stages_);
    processed_ += n;
    this->bytes_in_ += bytes;
    ++this->chunks_;
  }

  // The whole array at once, n elements in the session's device memory (header.device_memory).
  void FoldOnDevice(const void* in, uint64_t n) {
    session_->ProcessDevice(in, n, this->stages_);
    processed_ = n;
    this->bytes_in_ = n * engine::SizeOf(dtype_);
    ++this->chunks_;
  }

  // The call's one response, encoded now; gRPC sends it at Finish.
  void SetResponse(const Response& response) { *wire_response_ = EncodeMessage(response); }

  typename Base::MetricLabels Labels() const override {
    return {std::string(engine::Name(dtype_)), session_ ? session_->algorithm() : "",
            session_ ? session_->device() : ""};
  }

  engine::DType dtype_ = engine::DType::kInt32;  // set by OnHeader: the engine's
  std::optional<NarrowInput> narrow_;             // set by OnHeader: a narrow input widened into dtype_
  std::unique_ptr<Session> session_;
  uint64_t processed_ = 0;

 private:
  grpc::ByteBuffer* wire_response_;  // gRPC's
};

}  // namespace gpuscan::server
