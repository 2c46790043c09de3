// The typed API: contiguous arrays in, vectors out, over the byte-level streaming calls (or, with
// shards, over several servers at once: shards.cc).
#include <algorithm>
#include <cstring>

#include "gpuscan/client.h"
#include "shards.h"
#include "typed_support.h"

namespace gpuscan {

using detail::FromScalar;
using detail::MemoryReplay;
using detail::VectorSink;

template <class T>
std::vector<size_t> Client::ShardBounds(size_t n, uint32_t shards) const {
  return detail::ShardBounds(n, ChunkBytes(sizeof(T)) / sizeof(T), shards);
}

template <class T>
ScanResult<T> Client::Scan(const T* data, size_t n, const ScanOptions& options) {
  ScanResult<T> result;
  result.values.resize(n);
  result.timing = ScanInto(data, n, result.values.data(), options);
  return result;
}

template <class T>
Timing Client::ScanInto(const T* data, size_t n, T* out, const ScanOptions& options) {
  // A carry: one stream (the server folds it into one array's results), never the client's lanes or shards.
  if (options.carry && (options.lanes > 1 || options.shards > 1)) {
    throw std::invalid_argument("gpuscan: a scan with a carry runs on one stream (ScanOptions asks for " +
                                std::to_string(options.lanes) + " lanes, " + std::to_string(options.shards) +
                                " shards)");
  }
  const uint32_t shards = options.carry ? 1 : ShardsFor<T>(options.shards, n);
  if (shards > 1 && detail::Shardable(DTypeOf<T>(), options.op, options.algorithm)) {
    return detail::ShardedScan(shard_pool_->Clients(shards), ShardBounds<T>(n, shards), data, out, options);
  }
  // Written by position: striped lanes copy their results at once.
  detail::BufferSink sink(out, n * sizeof(T), "the server");
  const Timing timing =
      ScanStream(detail::ScanHeaderFor<T>(options, n), MemoryReplay(data, n * sizeof(T)), sink.at(), {},
                 options.carry ? 1 : options.lanes);
  sink.CheckFull();
  return timing;
}

template <class T>
ReduceResult<T> Client::Reduce(const T* data, size_t n, v1::Operator op, uint32_t lanes, uint32_t shards) {
  shards = ShardsFor<T>(shards, n);
  if (shards > 1 && detail::Shardable(DTypeOf<T>(), op, v1::SCAN_ALGORITHM_DEFAULT)) {
    return detail::ShardedReduce(shard_pool_->Clients(shards), ShardBounds<T>(n, shards), data, op, lanes);
  }
  const v1::ReduceHeader header = detail::ReduceHeaderFor<T>(op, n);
  v1::ReduceResponse response = ReduceStream(header, MemoryReplay(data, n * sizeof(T)), {}, lanes);
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

v1::HistogramHeader HistogramHeaderFor(v1::DType dtype, const HistogramBins& bins) {
  v1::HistogramHeader header;
  header.set_dtype(dtype);
  if (bins.edges.empty()) {
    header.set_bins(bins.bins);
    header.set_lo(bins.lo);
    header.set_hi(bins.hi);
  } else {
    header.mutable_edges()->Add(bins.edges.begin(), bins.edges.end());
  }
  return header;
}

HistogramResult ToHistogramResult(const v1::HistogramResponse& r) {
  HistogramResult result;
  result.counts.resize(r.counts().size() / sizeof(uint64_t));
  std::memcpy(result.counts.data(), r.counts().data(), result.counts.size() * sizeof(uint64_t));
  result.edges.resize(r.edges().size() / sizeof(double));
  std::memcpy(result.edges.data(), r.edges().data(), result.edges.size() * sizeof(double));
  if (result.edges.size() != result.counts.size() + 1) {
    throw RpcError(grpc::Status(grpc::StatusCode::INTERNAL, "the server sent " + std::to_string(result.counts.size()) +
                                                                " counts with " + std::to_string(result.edges.size()) +
                                                                " edges"));
  }
  result.below = r.below();
  result.above = r.above();
  result.nan_count = r.nan_count();
  result.element_count = r.element_count();
  result.timing = FromProto(r.timing());
  return result;
}

template <class T>
HistogramResult Client::Histogram(const T* data, size_t n, const HistogramBins& bins) {
  v1::HistogramHeader header = HistogramHeaderFor(DTypeOf<T>(), bins);
  header.set_element_count(n);
  return ToHistogramResult(HistogramStream(header, MemoryReplay(data, n * sizeof(T))));
}

template <class T, class K>
ScanResult<T> Client::SegmentedScan(const T* data, size_t n, const K* keys, const SegmentedScanOptions& options) {
  static_assert(std::is_integral_v<K> && (sizeof(K) == 4 || sizeof(K) == 8), "keys: 32- or 64-bit integers");
  v1::SegmentedScanHeader header = detail::ScanKindHeader<v1::SegmentedScanHeader, T>(options, n);
  header.set_key_dtype(DTypeOf<K>());
  ScanResult<T> result;
  result.values.reserve(n);
  VectorSink<T> sink(result.values);
  result.timing = SegmentedScanStream(header, MemoryReplay(data, n * sizeof(T)), MemoryReplay(keys, n * sizeof(K)),
                                      [&sink](const void* p, size_t b) { sink(p, b); });
  sink.Check();
  return result;
}

template <class T>
ScanResult<T> Client::SegmentedScanHeads(const T* data, size_t n, const uint8_t* heads,
                                         const SegmentedScanOptions& options) {
  v1::SegmentedScanHeader header = detail::ScanKindHeader<v1::SegmentedScanHeader, T>(options, n);
  header.set_heads(true);
  ScanResult<T> result;
  result.values.reserve(n);
  VectorSink<T> sink(result.values);
  result.timing = SegmentedScanStream(header, MemoryReplay(data, n * sizeof(T)), MemoryReplay(heads, n),
                                      [&sink](const void* p, size_t b) { sink(p, b); });
  sink.Check();
  return result;
}

namespace {

// A Scan2D call on the rows x cols matrix `data`: the result, row-major, checked for its size.
template <class T>
ScanResult<T> MatrixScan(Client& client, const v1::Scan2DHeader& header, const T* data, size_t rows, size_t cols) {
  const size_t n = rows * cols;
  ScanResult<T> result;
  result.values.reserve(n);
  VectorSink<T> sink(result.values);
  result.timing =
      client.Scan2DStream(header, MemoryReplay(data, n * sizeof(T)), [&sink](const void* p, size_t b) { sink(p, b); });
  sink.Check();
  if (result.values.size() != n) {
    throw RpcError(grpc::Status(grpc::StatusCode::INTERNAL, "the server sent " + std::to_string(result.values.size()) +
                                                                " elements for a " + std::to_string(rows) + " x " +
                                                                std::to_string(cols) + " matrix"));
  }
  return result;
}

}  // namespace

template <class T>
ScanResult<T> Client::ScanAlong(const T* data, size_t rows, size_t cols, int axis, v1::Operator op, bool exclusive) {
  if (axis != 0 && axis != 1) {
    throw std::invalid_argument("gpuscan: ScanAlong axis " + std::to_string(axis) + " of a matrix: 0 or 1");
  }
  if (!ServesOperation("scan_axis")) {
    throw RpcError(grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                                "the server does not serve scans along an axis (no \"scan_axis\" in "
                                "ServerInfo.operations: an older version)"));
  }
  v1::Scan2DHeader header;
  header.set_dtype(DTypeOf<T>());
  header.set_op(op);
  header.set_cols(cols);
  header.set_rows(rows);
  header.set_axis(axis == 0 ? v1::SCAN_AXIS_COLUMNS : v1::SCAN_AXIS_ROWS);
  header.set_kind(exclusive ? v1::SCAN_KIND_EXCLUSIVE : v1::SCAN_KIND_INCLUSIVE);
  return MatrixScan(*this, header, data, rows, cols);
}

template <class T>
ScanResult<T> Client::Scan2D(const T* data, size_t rows, size_t cols, v1::Operator op) {
  v1::Scan2DHeader header;
  header.set_dtype(DTypeOf<T>());
  header.set_op(op);
  header.set_cols(cols);
  header.set_rows(rows);
  return MatrixScan(*this, header, data, rows, cols);
}

template <class T, class K>
ReduceByKeyResult<T, K> Client::ReduceByKey(const T* data, size_t n, const K* keys, v1::Operator op) {
  static_assert(std::is_integral_v<K> && (sizeof(K) == 4 || sizeof(K) == 8), "keys: 32- or 64-bit integers");
  v1::ReduceByKeyHeader header;
  header.set_dtype(DTypeOf<T>());
  header.set_op(op);
  header.set_key_dtype(DTypeOf<K>());
  header.set_element_count(n);
  ReduceByKeyResult<T, K> result;
  VectorSink<K> keys_sink(result.keys);
  VectorSink<T> values_sink(result.values);
  const v1::ReduceByKeyResponse last = ReduceByKeyStream(
      header, MemoryReplay(data, n * sizeof(T)), MemoryReplay(keys, n * sizeof(K)),
      [&keys_sink](const void* p, size_t b) { keys_sink(p, b); },
      [&values_sink](const void* p, size_t b) { values_sink(p, b); });
  keys_sink.Check();
  values_sink.Check();
  if (result.keys.size() != result.values.size() || result.keys.size() != last.run_count()) {
    throw RpcError(grpc::Status(grpc::StatusCode::INTERNAL,
                                "the server sent " + std::to_string(result.keys.size()) + " keys and " +
                                    std::to_string(result.values.size()) + " values for " +
                                    std::to_string(last.run_count()) + " runs"));
  }
  result.timing = FromProto(last.timing());
  return result;
}

namespace {

// One sort call of n keys (and values) into `result`, as `output` asks.
template <class T, class V>
void RunSort(Client& client, v1::SortOutput output, const T* keys, const V* values, size_t n, bool descending,
             SortResult<T, V>& result) {
  v1::SortHeader header;
  header.set_dtype(DTypeOf<T>());
  header.set_descending(descending);
  header.set_output(output);
  const bool with_values = output == v1::SORT_OUTPUT_KEYS_AND_VALUES;  // (values may be null when n is 0)
  if (with_values) header.set_values_dtype(DTypeOf<V>());
  header.set_element_count(n);
  VectorSink<T> k(result.keys);
  VectorSink<V> v(result.values);
  VectorSink<int64_t> i(result.indices);
  const v1::SortResponse last = client.SortStream(
      header, MemoryReplay(keys, n * sizeof(T)), with_values ? MemoryReplay(values, n * sizeof(V)) : Replay{},
      [&k](const void* p, size_t b) { k(p, b); }, [&v](const void* p, size_t b) { v(p, b); },
      [&i](const void* p, size_t b) { i(p, b); });
  k.Check();
  v.Check();
  i.Check();
  const bool keys_wanted = output != v1::SORT_OUTPUT_INDICES;
  const bool indices_wanted = output == v1::SORT_OUTPUT_INDICES || output == v1::SORT_OUTPUT_KEYS_AND_INDICES;
  if ((keys_wanted && result.keys.size() != n) || (with_values && result.values.size() != n) ||
      (indices_wanted && result.indices.size() != n) || last.element_count() != n) {
    throw RpcError(grpc::Status(grpc::StatusCode::DATA_LOSS, "the server sorted " + std::to_string(last.element_count()) +
                                                                 " of " + std::to_string(n) + " elements"));
  }
  result.timing = FromProto(last.timing());
}

}  // namespace

template <class T>
SortResult<T> Client::Sort(const T* keys, size_t n, bool descending) {
  SortResult<T> r;
  RunSort<T, T>(*this, v1::SORT_OUTPUT_KEYS, keys, nullptr, n, descending, r);
  return r;
}

template <class T>
SortResult<T> Client::Argsort(const T* keys, size_t n, bool descending) {
  SortResult<T> r;
  RunSort<T, T>(*this, v1::SORT_OUTPUT_INDICES, keys, nullptr, n, descending, r);
  return r;
}

template <class T, class V>
SortResult<T, V> Client::SortPairs(const T* keys, const V* values, size_t n, bool descending) {
  SortResult<T, V> r;
  RunSort<T, V>(*this, v1::SORT_OUTPUT_KEYS_AND_VALUES, keys, values, n, descending, r);
  return r;
}

template <class T>
CompactResult<T> Client::Compact(const T* data, size_t n, const CompactOptions& options) {
  const uint32_t shards = ShardsFor<T>(options.shards, n);
  if (shards > 1) return detail::ShardedCompact(shard_pool_->Clients(shards), ShardBounds<T>(n, shards), data, options);
  const v1::CompactHeader header = detail::CompactHeaderFor<T>(options, n);
  const bool use_flags = header.use_flags();

  CompactResult<T> result;
  VectorSink<T> values(result.values);
  VectorSink<int64_t> indices(result.indices);
  Replay flags;
  if (use_flags) flags = MemoryReplay(options.flags.data(), options.flags.size());
  v1::CompactResponse final_response = CompactStream(
      header, MemoryReplay(data, n * sizeof(T)), flags,
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
  template Timing Client::ScanInto<T>(const T*, size_t, T*, const ScanOptions&);      \
  template ReduceResult<T> Client::Reduce<T>(const T*, size_t, v1::Operator, uint32_t, uint32_t); \
  template CompactResult<T> Client::Compact<T>(const T*, size_t, const CompactOptions&); \
  template HistogramResult Client::Histogram<T>(const T*, size_t, const HistogramBins&); \
  template ScanResult<T> Client::SegmentedScanHeads<T>(const T*, size_t, const uint8_t*, const SegmentedScanOptions&); \
  template ScanResult<T> Client::SegmentedScan<T, int32_t>(const T*, size_t, const int32_t*, const SegmentedScanOptions&); \
  template ScanResult<T> Client::SegmentedScan<T, int64_t>(const T*, size_t, const int64_t*, const SegmentedScanOptions&); \
  template ScanResult<T> Client::SegmentedScan<T, uint32_t>(const T*, size_t, const uint32_t*, const SegmentedScanOptions&); \
  template ScanResult<T> Client::SegmentedScan<T, uint64_t>(const T*, size_t, const uint64_t*, const SegmentedScanOptions&); \
  template ReduceByKeyResult<T, int32_t> Client::ReduceByKey<T, int32_t>(const T*, size_t, const int32_t*, v1::Operator); \
  template ReduceByKeyResult<T, int64_t> Client::ReduceByKey<T, int64_t>(const T*, size_t, const int64_t*, v1::Operator); \
  template ReduceByKeyResult<T, uint32_t> Client::ReduceByKey<T, uint32_t>(const T*, size_t, const uint32_t*, v1::Operator); \
  template ReduceByKeyResult<T, uint64_t> Client::ReduceByKey<T, uint64_t>(const T*, size_t, const uint64_t*, v1::Operator); \
  template ScanResult<T> Client::Scan2D<T>(const T*, size_t, size_t, v1::Operator); \
  template ScanResult<T> Client::ScanAlong<T>(const T*, size_t, size_t, int, v1::Operator, bool); \
  template SortResult<T> Client::Sort<T>(const T*, size_t, bool); \
  template SortResult<T> Client::Argsort<T>(const T*, size_t, bool); \
  template SortResult<T, int32_t> Client::SortPairs<T, int32_t>(const T*, const int32_t*, size_t, bool); \
  template SortResult<T, int64_t> Client::SortPairs<T, int64_t>(const T*, const int64_t*, size_t, bool); \
  template SortResult<T, uint32_t> Client::SortPairs<T, uint32_t>(const T*, const uint32_t*, size_t, bool); \
  template SortResult<T, uint64_t> Client::SortPairs<T, uint64_t>(const T*, const uint64_t*, size_t, bool); \
  template SortResult<T, float> Client::SortPairs<T, float>(const T*, const float*, size_t, bool); \
  template SortResult<T, double> Client::SortPairs<T, double>(const T*, const double*, size_t, bool);
GPUSCAN_FOR_EACH_ELEMENT_TYPE(GPUSCAN_INSTANTIATE)
#undef GPUSCAN_INSTANTIATE

}  // namespace gpuscan
