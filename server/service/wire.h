// The server's raw messages: gpuscan/wire (the field walk over gRPC's slices) with the large
// bytes field gathered into, or sent from, a Payload (payload.h) instead of a std::string.
#pragma once

#include <google/protobuf/message_lite.h>
#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/status.h>

#include "gpuscan/v1/gpuscan.pb.h"
#include "service/payload.h"

namespace gpuscan::server {

// Parses `buffer` into `message`, except bytes field `field`, whose last occurrence (protobuf's
// rule for a singular field) is gathered into *payload (left empty when absent). INVALID_ARGUMENT
// naming `what` when the bytes are not a valid message.
grpc::Status DecodeWithPayload(const grpc::ByteBuffer& buffer, int field, PayloadPool& pool,
                               google::protobuf::MessageLite* message, Payload* payload, const char* what);

// `message` (which must not set `field` itself) followed by `field` carrying the payload's bytes,
// referenced, not copied. An empty payload adds nothing (protobuf's encoding of an empty field).
grpc::ByteBuffer EncodeWithPayload(const google::protobuf::MessageLite& message, int field, Payload payload);

// The raw Scan's messages: a ScanRequest / ScanResponse whose data is a payload.
struct ScanChunk {
  v1::ScanRequest msg;  // data left empty
  Payload data;
  bool has_header() const { return msg.has_header(); }
  const v1::ScanHeader& header() const { return msg.header(); }
};

struct ScanReply {
  v1::ScanResponse msg;  // data left empty
  Payload data;
  ScanReply() = default;
  ScanReply(ScanReply&&) = default;
  ScanReply& operator=(ScanReply&&) = default;
  // Copied only to hand an array's final response to each of its lanes (it has no data).
  ScanReply(const ScanReply& o) : msg(o.msg), data(o.data.Copy()) {}
};

}  // namespace gpuscan::server
