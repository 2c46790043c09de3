// SourceAt and SinkAt: inputs and results by position, so striped lanes copy at once.
#include <algorithm>
#include <cstring>

#include "gpuscan/client.h"

namespace gpuscan {

SourceAt SourceAt::Memory(const void* data, uint64_t bytes) {
  const char* p = static_cast<const char*>(data);
  SourceAt at(bytes, [p](uint64_t offset, void* buf, size_t n) {
    if (n > 0) std::memcpy(buf, p + offset, n);
  });
  at.memory_ = p;
  return at;
}

size_t SourceAt::operator()(void* buf, size_t max_bytes) {
  const size_t n = static_cast<size_t>(std::min<uint64_t>(max_bytes, bytes_ - pos_));
  if (n > 0) read_(pos_, buf, n);
  pos_ += n;
  return n;
}

SinkAt SinkAt::Memory(void* data, uint64_t capacity, std::string who) {
  char* p = static_cast<char*>(data);
  return SinkAt([p, capacity, who = std::move(who)](uint64_t offset, const void* src, size_t n) {
    if (offset > capacity || n > capacity - offset) {
      throw RpcError(grpc::StatusCode::DATA_LOSS, who + " returned bytes [" + std::to_string(offset) + ", " +
                                                      std::to_string(offset + n) + ") of a result of " +
                                                      std::to_string(capacity) + " bytes");
    }
    if (n > 0) std::memcpy(p + offset, src, n);
  });
}

void SinkAt::operator()(const void* data, size_t bytes) {
  write_(pos_, data, bytes);
  pos_ += bytes;
}

}  // namespace gpuscan
