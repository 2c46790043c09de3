#include "service/wire.h"

#include <gpuscan/wire/fields.h>

namespace gpuscan::server {

grpc::Status DecodeWithPayload(const grpc::ByteBuffer& buffer, int field, PayloadPool& pool,
                               google::protobuf::MessageLite* message, Payload* payload, const char* what, int second,
                               Payload* second_payload) {
  wire::SplitMessage split;
  *payload = Payload();
  if (second_payload) *second_payload = Payload();
  if (grpc::Status s = wire::Parse(buffer, field, what, message, &split, second); !s.ok()) return s;
  // The server's one copy of the chunk.
  if (split.field_bytes > 0) {
    *payload = pool.Take(split.field_bytes);
    wire::Gather(split.field, payload->data());
  }
  if (second_payload && split.second_bytes > 0) {
    *second_payload = pool.Take(split.second_bytes);
    wire::Gather(split.second, second_payload->data());
  }
  return grpc::Status::OK;
}

grpc::ByteBuffer EncodeWithPayload(const google::protobuf::MessageLite& message, int field, Payload payload, int second,
                                   Payload second_payload) {
  return wire::Join(message, field, std::move(payload).ToSlice(), second, std::move(second_payload).ToSlice());
}

// Serialized straight into the slice gRPC sends: one copy of the message's bytes (ReduceByKey's
// responses carry a chunk of runs' keys and values), as gRPC's own protobuf codec makes.
grpc::ByteBuffer EncodeMessage(const google::protobuf::MessageLite& message) {
  const size_t bytes = message.ByteSizeLong();
  grpc::Slice slice(bytes);
  message.SerializeWithCachedSizesToArray(const_cast<uint8_t*>(slice.begin()));
  return grpc::ByteBuffer(&slice, 1);
}

}  // namespace gpuscan::server
