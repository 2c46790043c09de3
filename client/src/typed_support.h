// Internal: what the typed API (typed_calls.cc) and its shards (shards.cc) share: headers built
// from the typed options, memory as a Source, vectors and spans as Sinks.
#pragma once

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "gpuscan/client.h"

namespace gpuscan::detail {

// Hands out the bytes of one array in caller-sized pieces.
inline Source MemorySource(const void* data, size_t bytes) {
  auto p = static_cast<const char*>(data);
  return [p, bytes, pos = size_t{0}](void* buf, size_t max) mutable {
    size_t n = std::min(max, bytes - pos);
    if (n > 0) std::memcpy(buf, p + pos, n);
    pos += n;
    return n;
  };
}

// The same bytes as a Replay: the typed calls' inputs are in memory, so they can be retried.
inline Replay MemoryReplay(const void* data, size_t bytes) {
  return [data, bytes] { return MemorySource(data, bytes); };
}

// Appends result bytes to a vector<T>; tolerates an element split across messages.
template <class T>
class VectorSink {
 public:
  explicit VectorSink(std::vector<T>& v) : v_(v) {}
  void operator()(const void* data, size_t bytes) {
    if (bytes == 0) return;
    v_.resize((bytes_ + bytes + sizeof(T) - 1) / sizeof(T));
    std::memcpy(reinterpret_cast<char*>(v_.data()) + bytes_, data, bytes);
    bytes_ += bytes;
  }
  void Check() const {
    if (bytes_ % sizeof(T) != 0) {
      throw RpcError(grpc::StatusCode::DATA_LOSS, "server sent a partial element");
    }
  }

 private:
  std::vector<T>& v_;
  size_t bytes_ = 0;
};

template <class T>
T FromScalar(const v1::Scalar& s) {
  switch (s.value_case()) {
    case v1::Scalar::kIntValue: return static_cast<T>(s.int_value());
    case v1::Scalar::kUintValue: return static_cast<T>(s.uint_value());
    case v1::Scalar::kFloatValue: return static_cast<T>(s.float_value());
    default: return T{};
  }
}

// Writes result bytes into a caller's buffer of `capacity` bytes, in order.
class SpanSink {
 public:
  SpanSink(void* data, size_t capacity) : p_(static_cast<char*>(data)), capacity_(capacity) {}
  void operator()(const void* data, size_t bytes) {
    if (bytes > capacity_ - used_) {
      throw RpcError(grpc::StatusCode::DATA_LOSS, "server sent more result bytes than the shard holds");
    }
    if (bytes) std::memcpy(p_ + used_, data, bytes);
    used_ += bytes;
  }
  size_t used() const { return used_; }
  // After the call: DATA_LOSS unless the whole span was filled ("<who> returned X of Y ...").
  void CheckFull(const std::string& who) const {
    if (used_ != capacity_) {
      throw RpcError(grpc::StatusCode::DATA_LOSS, who + " returned " + std::to_string(used_) + " of " +
                                                      std::to_string(capacity_) + " result bytes");
    }
  }

 private:
  char* p_;
  size_t capacity_;
  size_t used_ = 0;
};

template <class T>
v1::ScanHeader ScanHeaderFor(const ScanOptions& options, size_t n) {
  v1::ScanHeader header;
  header.set_dtype(DTypeOf<T>());
  header.set_op(options.op);
  header.set_kind(options.exclusive ? v1::SCAN_KIND_EXCLUSIVE : v1::SCAN_KIND_INCLUSIVE);
  header.set_algorithm(options.algorithm);
  header.set_element_count(n);
  return header;
}

template <class T>
v1::ReduceHeader ReduceHeaderFor(v1::Operator op, size_t n) {
  v1::ReduceHeader header;
  header.set_dtype(DTypeOf<T>());
  header.set_op(op);
  header.set_element_count(n);
  return header;
}

template <class T>
v1::CompactHeader CompactHeaderFor(const CompactOptions& options, size_t n) {
  v1::CompactHeader header;
  header.set_dtype(DTypeOf<T>());
  if (options.use_flags || !options.flags.empty()) {
    header.set_use_flags(true);
  } else {
    *header.mutable_predicate() = options.predicate;
  }
  header.set_output(options.output);
  header.set_element_count(n);
  return header;
}

}  // namespace gpuscan::detail
