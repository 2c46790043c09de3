// The typed API: contiguous arrays in, vectors out, over the byte-level streaming calls.
#include <algorithm>
#include <cstring>

#include "gpuscan/client.h"

namespace gpuscan {
namespace {

// Hands out the bytes of one array in caller-sized pieces.
Source MemorySource(const void* data, size_t bytes) {
  auto p = static_cast<const char*>(data);
  return [p, bytes, pos = size_t{0}](void* buf, size_t max) mutable {
    size_t n = std::min(max, bytes - pos);
    if (n > 0) std::memcpy(buf, p + pos, n);
    pos += n;
    return n;
  };
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

}  // namespace

template <class T>
ScanResult<T> Client::Scan(const T* data, size_t n, const ScanOptions& options) {
  v1::ScanHeader header;
  header.set_dtype(DTypeOf<T>());
  header.set_op(options.op);
  header.set_kind(options.exclusive ? v1::SCAN_KIND_EXCLUSIVE : v1::SCAN_KIND_INCLUSIVE);
  header.set_algorithm(options.algorithm);
  header.set_element_count(n);
  ScanResult<T> result;
  result.values.reserve(n);
  VectorSink<T> sink(result.values);
  result.timing = ScanStream(header, MemorySource(data, n * sizeof(T)),
                             [&sink](const void* p, size_t b) { sink(p, b); }, {}, options.lanes);
  sink.Check();
  return result;
}

template <class T>
ReduceResult<T> Client::Reduce(const T* data, size_t n, v1::Operator op, uint32_t lanes) {
  v1::ReduceHeader header;
  header.set_dtype(DTypeOf<T>());
  header.set_op(op);
  header.set_element_count(n);
  v1::ReduceResponse response = ReduceStream(header, MemorySource(data, n * sizeof(T)), {}, lanes);
  ReduceResult<T> result;
  // raw_value is exact for every dtype; the Scalar is the fallback.
  if (response.raw_value().size() == sizeof(T)) {
    std::memcpy(&result.value, response.raw_value().data(), sizeof(T));
  } else {
    result.value = FromScalar<T>(response.value());
  }
  result.element_count = response.element_count();
  result.timing = FromProto(response.timing());
  return result;
}

template <class T>
CompactResult<T> Client::Compact(const T* data, size_t n, const CompactOptions& options) {
  v1::CompactHeader header;
  header.set_dtype(DTypeOf<T>());
  const bool use_flags = options.use_flags || !options.flags.empty();
  if (use_flags) {
    header.set_use_flags(true);
  } else {
    *header.mutable_predicate() = options.predicate;
  }
  header.set_output(options.output);
  header.set_element_count(n);

  CompactResult<T> result;
  VectorSink<T> values(result.values);
  VectorSink<int64_t> indices(result.indices);
  Source flags;
  if (use_flags) flags = MemorySource(options.flags.data(), options.flags.size());
  v1::CompactResponse final_response = CompactStream(
      header, MemorySource(data, n * sizeof(T)), std::move(flags),
      [&values](const void* p, size_t b) { values(p, b); },
      [&indices](const void* p, size_t b) { indices(p, b); }, {}, options.lanes);
  values.Check();
  indices.Check();
  result.kept_count = final_response.kept_count();
  result.timing = FromProto(final_response.timing());
  return result;
}

#define GPUSCAN_INSTANTIATE(T)                                                        \
  template ScanResult<T> Client::Scan<T>(const T*, size_t, const ScanOptions&);       \
  template ReduceResult<T> Client::Reduce<T>(const T*, size_t, v1::Operator, uint32_t); \
  template CompactResult<T> Client::Compact<T>(const T*, size_t, const CompactOptions&);
GPUSCAN_INSTANTIATE(int32_t)
GPUSCAN_INSTANTIATE(int64_t)
GPUSCAN_INSTANTIATE(uint32_t)
GPUSCAN_INSTANTIATE(uint64_t)
GPUSCAN_INSTANTIATE(float)
GPUSCAN_INSTANTIATE(double)
#undef GPUSCAN_INSTANTIATE

}  // namespace gpuscan
