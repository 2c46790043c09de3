// ProtoWire: how a typed RPC's messages cross the wire, StreamingCall's default Wire parameter
// (raw_wire.h is the raw one).
#pragma once

#include <utility>

#include <grpcpp/support/status.h>

#include "service/call_context.h"

namespace gpuscan::server {

// How a call's messages cross the wire. ProtoWire: gRPC's protobuf codec (the reactor is typed on
// Req and Resp). A raw RPC's wire (ScanWire) reads and writes grpc::ByteBuffer and converts them
// itself, so its data bytes stay in one Payload from request to response.
template <class Req, class Resp>
struct ProtoWire {
  using In = Req;
  using Out = Resp;
  static grpc::Status Decode(In& in, const CallContext&, Req* req) {
    *req = std::move(in);
    in.Clear();
    return grpc::Status::OK;
  }
  static Out Encode(Resp&& resp) { return std::move(resp); }
};

}  // namespace gpuscan::server
