// RawWire: how a raw RPC's messages cross the wire, StreamingCall's Wire parameter (ProtoWire in
// proto_wire.h is the typed one). Each request's bytes are gathered once into payload blocks
// (DecodeChunk, wire.h; kWhat names the message when its bytes are not valid). Each reply becomes
// what the stream writes: for a bidi RPC (Out = grpc::ByteBuffer) its encoding, whose payloads go
// out by reference; for a client-streaming RPC (Out = the response) the response itself, which
// the call writes when it finishes.
#pragma once

#include <type_traits>
#include <utility>

#include <google/protobuf/message_lite.h>
#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/status.h>

#include "service/call_context.h"
#include "service/wire.h"

namespace gpuscan::server {

template <class Chunk, class Reply, const char* kWhat, class OutMessage = grpc::ByteBuffer>
struct RawWire {
  using In = grpc::ByteBuffer;
  using Out = OutMessage;
  static grpc::Status Decode(In& in, const CallContext& ctx, Chunk* req) {
    return DecodeChunk(in, *ctx.payloads, req, kWhat);
  }
  static Out Encode(Reply&& r) {
    if constexpr (std::is_same_v<Out, Reply>) {
      return std::move(r);
    } else if constexpr (std::is_base_of_v<google::protobuf::MessageLite, Reply>) {
      return EncodeMessage(r);
    } else {
      return server::Encode(std::move(r));
    }
  }
};

}  // namespace gpuscan::server
