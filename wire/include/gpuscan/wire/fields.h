// A protobuf message on gRPC's slices, with one length-delimited field (an array's bytes) left
// where gRPC put it: Split reads the message's other fields for protobuf and points at the field's
// bytes; Join writes a message followed by the field as a slice that is referenced, not copied.
// The encoding is protobuf's own (fields may come in any order), so a peer cannot tell.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include <google/protobuf/message_lite.h>
#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/slice.h>
#include <grpcpp/support/status.h>

namespace gpuscan::wire {

// Bytes of one slice.
struct Piece {
  const char* data;
  size_t size;
};

struct SplitMessage {
  std::vector<grpc::Slice> slices;  // references to the message's slices: the pieces point here
  std::string rest;                 // every other field, re-encoded, for protobuf to parse
  std::vector<Piece> field;         // the field's last occurrence (protobuf's rule), in order
  size_t field_bytes = 0;
  std::vector<Piece> second;        // the second field's, when one was asked for (Compact's flags)
  size_t second_bytes = 0;
};

// Splits `buffer` at `field` (and at `second`, unless 0). INVALID_ARGUMENT "<what> is not a valid
// message: <why>" when its bytes are not a protobuf encoding (groups, which no gpuscan message
// has, included).
grpc::Status Split(const grpc::ByteBuffer& buffer, int field, const char* what, SplitMessage* out, int second = 0);

// Split, then `message` parsed from the other fields.
grpc::Status Parse(const grpc::ByteBuffer& buffer, int field, const char* what, google::protobuf::MessageLite* message,
                   SplitMessage* out, int second = 0);

// `message` (which must leave `field` and `second` unset) followed by `field` carrying `data`,
// then `second` carrying `second_data`; an empty slice adds nothing (protobuf's encoding of an
// empty bytes field).
grpc::ByteBuffer Join(const google::protobuf::MessageLite& message, int field, const grpc::Slice& data,
                      int second = 0, const grpc::Slice& second_data = grpc::Slice());

// Copies the pieces, in order, to dst (which holds their total size).
void Gather(const std::vector<Piece>& pieces, char* dst);

}  // namespace gpuscan::wire
