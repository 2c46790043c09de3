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
// With `second` (not 0), that bytes field goes to *second_payload the same way.
grpc::Status DecodeWithPayload(const grpc::ByteBuffer& buffer, int field, PayloadPool& pool,
                               google::protobuf::MessageLite* message, Payload* payload, const char* what,
                               int second = 0, Payload* second_payload = nullptr);

// `message` (which must not set `field` itself) followed by `field` carrying the payload's bytes,
// referenced, not copied (then `second` carrying second_payload's, unless 0). An empty payload
// adds nothing (protobuf's encoding of an empty field).
grpc::ByteBuffer EncodeWithPayload(const google::protobuf::MessageLite& message, int field, Payload payload,
                                   int second = 0, Payload second_payload = Payload());

// A request of a raw RPC: its message without the data, and the data in a payload.
template <class Msg>
struct RawChunk {
  Msg msg;  // data left empty
  Payload data;
  bool has_header() const { return msg.has_header(); }
  const auto& header() const { return msg.header(); }
};
using ScanChunk = RawChunk<v1::ScanRequest>;
using ReduceChunk = RawChunk<v1::ReduceRequest>;
using HistogramChunk = RawChunk<v1::HistogramRequest>;

// Decodes a raw request (its data field, Msg::kDataFieldNumber, into a payload); clears `in`.
template <class Msg>
grpc::Status DecodeChunk(grpc::ByteBuffer& in, PayloadPool& pool, RawChunk<Msg>* req, const char* what) {
  grpc::Status s = DecodeWithPayload(in, Msg::kDataFieldNumber, pool, &req->msg, &req->data, what);
  in.Clear();
  return s;
}

// Compact's raw messages: two payload fields each way (values and flags in; kept values and
// indices out).
struct CompactChunk {
  v1::CompactRequest msg;  // values and flags left empty
  Payload values, flags;
  bool has_header() const { return msg.has_header(); }
  const v1::CompactHeader& header() const { return msg.header(); }
};

inline grpc::Status DecodeChunk(grpc::ByteBuffer& in, PayloadPool& pool, CompactChunk* req, const char* what) {
  grpc::Status s = DecodeWithPayload(in, v1::CompactRequest::kValuesFieldNumber, pool, &req->msg, &req->values, what,
                                     v1::CompactRequest::kFlagsFieldNumber, &req->flags);
  in.Clear();
  return s;
}

// SegmentedScan's and ReduceByKey's raw requests: values (data) and their keys (or head bytes),
// each gathered into a payload.
template <class Msg>
struct KeyedChunk {
  Msg msg;  // data and keys left empty
  Payload data, keys;
  bool has_header() const { return msg.has_header(); }
  const auto& header() const { return msg.header(); }
};
using SegmentedScanChunk = KeyedChunk<v1::SegmentedScanRequest>;
using ReduceByKeyChunk = KeyedChunk<v1::ReduceByKeyRequest>;

template <class Msg>
grpc::Status DecodeChunk(grpc::ByteBuffer& in, PayloadPool& pool, KeyedChunk<Msg>* req, const char* what) {
  grpc::Status s = DecodeWithPayload(in, Msg::kDataFieldNumber, pool, &req->msg, &req->data, what,
                                     Msg::kKeysFieldNumber, &req->keys);
  in.Clear();
  return s;
}

struct CompactReply {
  v1::CompactResponse msg;  // values and indices left empty
  Payload values, indices;
  CompactReply() = default;
  CompactReply(CompactReply&&) = default;
  CompactReply& operator=(CompactReply&&) = default;
  // Copied only to hand an array's final response to each of its lanes (it has no data).
  CompactReply(const CompactReply& o) : msg(o.msg), values(o.values.Copy()), indices(o.indices.Copy()) {}
};

inline grpc::ByteBuffer Encode(CompactReply&& r) {
  return EncodeWithPayload(r.msg, v1::CompactResponse::kValuesFieldNumber, std::move(r.values),
                           v1::CompactResponse::kIndicesFieldNumber, std::move(r.indices));
}

// A message with no payload, encoded (a raw client-streaming RPC's one response).
grpc::ByteBuffer EncodeMessage(const google::protobuf::MessageLite& message);

struct ScanReply {
  v1::ScanResponse msg;  // data left empty
  Payload data;
  ScanReply() = default;
  ScanReply(ScanReply&&) = default;
  ScanReply& operator=(ScanReply&&) = default;
  // Copied only to hand an array's final response to each of its lanes (it has no data).
  ScanReply(const ScanReply& o) : msg(o.msg), data(o.data.Copy()) {}
};

inline grpc::ByteBuffer Encode(ScanReply&& r) {
  return EncodeWithPayload(r.msg, v1::ScanResponse::kDataFieldNumber, std::move(r.data));
}

}  // namespace gpuscan::server
