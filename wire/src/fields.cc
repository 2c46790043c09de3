#include "gpuscan/wire/fields.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace gpuscan::wire {
namespace {

constexpr uint32_t kLengthDelimited = 2;

void AppendVarint(uint64_t v, std::string* out) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>(v | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

// Reads across non-empty slices as one byte sequence.
class SliceReader {
 public:
  explicit SliceReader(const std::vector<grpc::Slice>& slices) : slices_(slices) {
    for (const grpc::Slice& s : slices_) remaining_ += s.size();
  }
  size_t remaining() const { return remaining_; }

  // A varint of at most max_bytes bytes whose value is at most max_value. Protobuf reads a value
  // in up to ten bytes but a tag or a length in five, a length below 2^31: accepting more would
  // let through (and re-encode canonically) bytes that protobuf itself refuses.
  bool ReadVarint(uint64_t* v, int max_bytes = 10, uint64_t max_value = UINT64_MAX) {
    *v = 0;
    for (int i = 0, shift = 0; i < max_bytes; ++i, shift += 7) {
      if (remaining_ == 0) return false;
      const uint8_t b = slices_[index_].begin()[offset_];
      Advance(1);
      *v |= uint64_t{b & 0x7fu} << shift;
      if ((b & 0x80) == 0) return *v <= max_value;
    }
    return false;  // longer than max_bytes
  }

  // The next n bytes (n <= remaining()) as pieces of the slices, appended to *pieces when set.
  void Take(size_t n, std::vector<Piece>* pieces) {
    while (n > 0) {
      const grpc::Slice& s = slices_[index_];
      const size_t take = std::min(n, s.size() - offset_);
      if (pieces) pieces->push_back({reinterpret_cast<const char*>(s.begin()) + offset_, take});
      Advance(take);
      n -= take;
    }
  }

 private:
  void Advance(size_t n) {
    offset_ += n;
    remaining_ -= n;
    if (index_ < slices_.size() && offset_ == slices_[index_].size()) {
      ++index_;
      offset_ = 0;
    }
  }

  const std::vector<grpc::Slice>& slices_;
  size_t index_ = 0, offset_ = 0, remaining_ = 0;
};

}  // namespace

void Gather(const std::vector<Piece>& pieces, char* dst) {
  for (const Piece& p : pieces) {
    std::memcpy(dst, p.data, p.size);
    dst += p.size;
  }
}

grpc::Status Split(const grpc::ByteBuffer& buffer, int field, const char* what, SplitMessage* out, int second) {
  const auto invalid = [what](const std::string& why) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, std::string(what) + " is not a valid message: " + why);
  };
  out->slices.clear();
  out->rest.clear();
  out->field.clear();
  out->field_bytes = 0;
  out->second.clear();
  out->second_bytes = 0;
  if (buffer.Valid() && !buffer.Dump(&out->slices).ok()) return invalid("unreadable");
  auto& slices = out->slices;
  slices.erase(std::remove_if(slices.begin(), slices.end(), [](const grpc::Slice& s) { return s.size() == 0; }),
               slices.end());
  SliceReader reader(slices);
  std::vector<Piece> scratch;
  while (reader.remaining() > 0) {
    uint64_t tag = 0;
    if (!reader.ReadVarint(&tag, 5, UINT32_MAX)) return invalid("truncated or overlong field tag");
    const uint64_t number = tag >> 3;
    const uint32_t type = static_cast<uint32_t>(tag & 7);
    if (number == 0 || number > 536870911) return invalid("field number " + std::to_string(number));
    uint64_t length = 0;
    switch (type) {
      case 0:
        if (!reader.ReadVarint(&length)) return invalid("truncated varint of field " + std::to_string(number));
        AppendVarint(tag, &out->rest);
        AppendVarint(length, &out->rest);
        continue;
      case 1:
        length = 8;
        break;
      case 5:
        length = 4;
        break;
      case kLengthDelimited:
        if (!reader.ReadVarint(&length, 5, INT32_MAX)) {
          return invalid("truncated or overlong length of field " + std::to_string(number));
        }
        break;
      default:
        return invalid("wire type " + std::to_string(type) + " of field " + std::to_string(number));
    }
    if (length > reader.remaining()) {
      return invalid("field " + std::to_string(number) + " says " + std::to_string(length) + " bytes, " +
                     std::to_string(reader.remaining()) + " remain");
    }
    if (type == kLengthDelimited && (number == static_cast<uint64_t>(field) ||
                                     (second != 0 && number == static_cast<uint64_t>(second)))) {
      const bool first = number == static_cast<uint64_t>(field);
      std::vector<Piece>& pieces = first ? out->field : out->second;
      pieces.clear();  // a later occurrence replaces an earlier one
      (first ? out->field_bytes : out->second_bytes) = length;
      reader.Take(length, &pieces);
      continue;
    }
    AppendVarint(tag, &out->rest);
    if (type == kLengthDelimited) AppendVarint(length, &out->rest);
    scratch.clear();
    reader.Take(length, &scratch);
    for (const Piece& p : scratch) out->rest.append(p.data, p.size);
  }
  return grpc::Status::OK;
}

grpc::Status Parse(const grpc::ByteBuffer& buffer, int field, const char* what, google::protobuf::MessageLite* message,
                   SplitMessage* out, int second) {
  if (grpc::Status s = Split(buffer, field, what, out, second); !s.ok()) return s;
  if (!message->ParseFromString(out->rest)) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        std::string(what) + " is not a valid message: protobuf could not parse its fields");
  }
  return grpc::Status::OK;
}

grpc::ByteBuffer Join(const google::protobuf::MessageLite& message, int field, const grpc::Slice& data, int second,
                      const grpc::Slice& second_data) {
  std::string head = message.SerializeAsString();
  grpc::Slice slices[4];
  size_t count = 0;
  // Each non-empty field: its tag and length (on the head, or a small slice of their own after
  // the first field's bytes), then its bytes by reference.
  std::string between;
  if (data.size() > 0) {
    AppendVarint((static_cast<uint64_t>(field) << 3) | kLengthDelimited, &head);
    AppendVarint(data.size(), &head);
  }
  slices[count++] = grpc::Slice(head);
  if (data.size() > 0) slices[count++] = data;
  if (second != 0 && second_data.size() > 0) {
    AppendVarint((static_cast<uint64_t>(second) << 3) | kLengthDelimited, &between);
    AppendVarint(second_data.size(), &between);
    slices[count++] = grpc::Slice(between);
    slices[count++] = second_data;
  }
  return grpc::ByteBuffer(slices, count);
}

}  // namespace gpuscan::wire
