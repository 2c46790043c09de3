// Internal: what the typed API (typed_calls.cc) and its shards (shards.cc) share: headers built
// from the typed options, memory as a Source, vectors and spans as Sinks.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstring>
#include <string>
#include <vector>

#include "gpuscan/client.h"

namespace gpuscan::detail {

// Hands out the bytes of one array in caller-sized pieces, or by position (SourceAt: striped
// lanes read their chunks at once).
inline Source MemorySource(const void* data, size_t bytes) { return SourceAt::Memory(data, bytes); }

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

// A caller's buffer of `capacity` bytes as a SinkAt (striped lanes write it at once), which
// remembers the furthest byte written: with the calls' order check (each position once, none
// skipped) that says whether the whole result came. `who` names the sender in errors.
class BufferSink {
 public:
  BufferSink(void* data, size_t capacity, std::string who)
      : memory_(SinkAt::Memory(data, capacity, who)), capacity_(capacity), who_(std::move(who)) {}
  BufferSink(const BufferSink&) = delete;
  BufferSink& operator=(const BufferSink&) = delete;

  // The SinkAt to give a call; valid while this object lives.
  SinkAt at() {
    return SinkAt([this](uint64_t offset, const void* data, size_t n) {
      memory_.WriteAt(offset, data, n);
      uint64_t end = end_.load(std::memory_order_relaxed);
      while (offset + n > end && !end_.compare_exchange_weak(end, offset + n, std::memory_order_relaxed)) {
      }
    });
  }
  uint64_t end() const { return end_.load(); }
  // After the call: DATA_LOSS unless the whole buffer was written ("<who> returned X of Y ...").
  void CheckFull() const {
    if (end() != capacity_) {
      throw RpcError(grpc::StatusCode::DATA_LOSS, who_ + " returned " + std::to_string(end()) + " of " +
                                                      std::to_string(capacity_) + " result bytes");
    }
  }

 private:
  SinkAt memory_;
  uint64_t capacity_;
  std::string who_;
  std::atomic<uint64_t> end_{0};
};

// The headers of the typed options (ScanOptions, CompactOptions, ...), shared by the typed calls
// (T's dtype, n elements), the resident ones (the array's dtype and size) and pipeline stages
// (pipeline.cc): the dtype forms set no element_count.
//
// The header fields a scan and a segmented scan share: dtype, operator and kind.
template <class Header, class Options>
Header ScanKindHeader(v1::DType dtype, const Options& options) {
  Header header;
  header.set_dtype(dtype);
  header.set_op(options.op);
  header.set_kind(options.exclusive ? v1::SCAN_KIND_EXCLUSIVE : v1::SCAN_KIND_INCLUSIVE);
  return header;
}
template <class Header, class T, class Options>
Header ScanKindHeader(const Options& options, size_t n) {
  Header header = ScanKindHeader<Header>(DTypeOf<T>(), options);
  header.set_element_count(n);
  return header;
}

// RpcError UNIMPLEMENTED unless the server lists `operation` in ServerInfo.operations: an older
// server ignores the field that asks for it and answers a wrong result, not an error.
inline void RequireServed(Client& client, const std::string& operation, const std::string& what) {
  if (!client.ServesOperation(operation)) {
    throw RpcError(grpc::StatusCode::UNIMPLEMENTED, "the server does not serve " + what + " (no \"" + operation +
                                                        "\" in ServerInfo.operations: an older version)");
  }
}

inline v1::ScanHeader ScanHeaderFor(v1::DType dtype, const ScanOptions& options) {
  v1::ScanHeader header = ScanKindHeader<v1::ScanHeader>(dtype, options);
  header.set_algorithm(options.algorithm);
  if (options.carry) header.set_carry(*options.carry);
  return header;
}
template <class T>
v1::ScanHeader ScanHeaderFor(const ScanOptions& options, size_t n) {
  v1::ScanHeader header = ScanHeaderFor(DTypeOf<T>(), options);
  header.set_element_count(n);
  return header;
}

// Instantiates M(T) for every element type of the typed API.
#define GPUSCAN_FOR_EACH_ELEMENT_TYPE(M) M(int32_t) M(int64_t) M(uint32_t) M(uint64_t) M(float) M(double)

inline v1::ReduceHeader ReduceHeaderFor(v1::DType dtype, v1::Operator op) {
  v1::ReduceHeader header;
  header.set_dtype(dtype);
  header.set_op(op);
  return header;
}
template <class T>
v1::ReduceHeader ReduceHeaderFor(v1::Operator op, size_t n) {
  v1::ReduceHeader header = ReduceHeaderFor(DTypeOf<T>(), op);
  header.set_element_count(n);
  return header;
}

// Selection by flags when options.use_flags or options.flags says so, else by options.predicate.
inline v1::CompactHeader CompactHeaderFor(v1::DType dtype, const CompactOptions& options) {
  v1::CompactHeader header;
  header.set_dtype(dtype);
  if (options.use_flags || !options.flags.empty()) {
    header.set_use_flags(true);
  } else {
    *header.mutable_predicate() = options.predicate;
  }
  header.set_output(options.output);
  return header;
}
template <class T>
v1::CompactHeader CompactHeaderFor(const CompactOptions& options, size_t n) {
  v1::CompactHeader header = CompactHeaderFor(DTypeOf<T>(), options);
  header.set_element_count(n);
  return header;
}

}  // namespace gpuscan::detail
