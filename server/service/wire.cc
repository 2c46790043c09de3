#include "service/wire.h"

#include <gpuscan/wire/fields.h>

namespace gpuscan::server {

grpc::Status DecodeWithPayload(const grpc::ByteBuffer& buffer, int field, PayloadPool& pool,
                               google::protobuf::MessageLite* message, Payload* payload, const char* what) {
  wire::SplitMessage split;
  *payload = Payload();
  if (grpc::Status s = wire::Parse(buffer, field, what, message, &split); !s.ok()) return s;
  if (split.field_bytes > 0) {
    *payload = pool.Take(split.field_bytes);
    wire::Gather(split.field, payload->data());  // the server's one copy of the chunk
  }
  return grpc::Status::OK;
}

grpc::ByteBuffer EncodeWithPayload(const google::protobuf::MessageLite& message, int field, Payload payload) {
  return wire::Join(message, field, std::move(payload).ToSlice());
}

grpc::ByteBuffer EncodeMessage(const google::protobuf::MessageLite& message) {
  return wire::Join(message, /*field=*/0, grpc::Slice());  // no field follows
}

}  // namespace gpuscan::server
