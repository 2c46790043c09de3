#include "service/wire.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

namespace gpuscan::server {
namespace {

constexpr uint32_t kLengthDelimited = 2;

void AppendVarint(uint64_t v, std::string* out) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>(v | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

// Reads across gRPC's slices as one byte sequence.
class SliceReader {
 public:
  explicit SliceReader(const std::vector<grpc::Slice>& slices) : slices_(slices) {
    for (const grpc::Slice& s : slices_) remaining_ += s.size();
  }
  size_t remaining() const { return remaining_; }

  bool ReadVarint(uint64_t* v) {
    *v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (remaining_ == 0) return false;
      const uint8_t b = Byte();
      *v |= uint64_t{b & 0x7fu} << shift;
      if ((b & 0x80) == 0) return true;
    }
    return false;  // more than ten bytes
  }

  // Copies the next n bytes (n <= remaining()) to dst, or skips them when dst is null.
  void Read(size_t n, char* dst) {
    while (n > 0) {
      const grpc::Slice& s = slices_[index_];
      const size_t take = std::min(n, s.size() - offset_);
      if (dst) {
        std::memcpy(dst, s.begin() + offset_, take);
        dst += take;
      }
      Advance(take);
      n -= take;
    }
  }

 private:
  uint8_t Byte() {
    const uint8_t b = slices_[index_].begin()[offset_];
    Advance(1);
    return b;
  }
  void Advance(size_t n) {
    offset_ += n;
    remaining_ -= n;
    while (index_ < slices_.size() && offset_ == slices_[index_].size()) {
      ++index_;
      offset_ = 0;
    }
    // Empty slices before the next byte are skipped above.
  }

  const std::vector<grpc::Slice>& slices_;
  size_t index_ = 0, offset_ = 0, remaining_ = 0;
};

}  // namespace

grpc::Status DecodeWithPayload(const grpc::ByteBuffer& buffer, int field, PayloadPool& pool,
                               google::protobuf::MessageLite* message, Payload* payload, const char* what) {
  const auto invalid = [what](const std::string& why) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, std::string(what) + " is not a valid message: " + why);
  };
  std::vector<grpc::Slice> slices;
  if (buffer.Valid() && !buffer.Dump(&slices).ok()) return invalid("unreadable");
  // Leading empty slices would leave the reader on one; drop them all.
  slices.erase(std::remove_if(slices.begin(), slices.end(), [](const grpc::Slice& s) { return s.size() == 0; }),
               slices.end());
  SliceReader reader(slices);
  std::string rest;  // every other field, re-encoded for protobuf
  *payload = Payload();
  while (reader.remaining() > 0) {
    uint64_t tag = 0;
    if (!reader.ReadVarint(&tag)) return invalid("truncated field tag");
    const uint64_t number = tag >> 3;
    const uint32_t type = static_cast<uint32_t>(tag & 7);
    if (number == 0 || number > 536870911) return invalid("field number " + std::to_string(number));
    uint64_t length = 0;
    switch (type) {
      case 0:
        if (!reader.ReadVarint(&length)) return invalid("truncated varint of field " + std::to_string(number));
        AppendVarint(tag, &rest);
        AppendVarint(length, &rest);
        continue;
      case 1:
        length = 8;
        break;
      case 5:
        length = 4;
        break;
      case kLengthDelimited:
        if (!reader.ReadVarint(&length)) return invalid("truncated length of field " + std::to_string(number));
        break;
      default:
        return invalid("wire type " + std::to_string(type) + " of field " + std::to_string(number));
    }
    if (length > reader.remaining()) {
      return invalid("field " + std::to_string(number) + " says " + std::to_string(length) + " bytes, " +
                     std::to_string(reader.remaining()) + " remain");
    }
    if (number == static_cast<uint64_t>(field) && type == kLengthDelimited) {
      *payload = pool.Take(length);
      reader.Read(length, payload->data());
      continue;
    }
    AppendVarint(tag, &rest);
    if (type == kLengthDelimited) AppendVarint(length, &rest);
    const size_t at = rest.size();
    rest.resize(at + length);
    reader.Read(length, rest.data() + at);
  }
  if (!message->ParseFromString(rest)) return invalid("protobuf could not parse its fields");
  return grpc::Status::OK;
}

grpc::ByteBuffer EncodeWithPayload(const google::protobuf::MessageLite& message, int field, Payload payload) {
  std::string head = message.SerializeAsString();
  if (payload.empty()) {
    grpc::Slice only(head);
    return grpc::ByteBuffer(&only, 1);
  }
  AppendVarint((static_cast<uint64_t>(field) << 3) | kLengthDelimited, &head);
  AppendVarint(payload.size(), &head);
  grpc::Slice slices[2] = {grpc::Slice(head), std::move(payload).ToSlice()};
  return grpc::ByteBuffer(slices, 2);
}

}  // namespace gpuscan::server
