// The operations on resident inputs (header.resident): the raw calls (Client::ScanResident,
// SegmentedScanResident, Scan2DResident, HistogramResident, CompactResident, ReduceByKeyResident,
// SortResident) and the typed forms of resident_ops.h. A call sends its header alone; results
// that are not kept stream back as the streamed call's do, into the same Sinks. A call that keeps
// is one try (a try whose answer was lost may have kept its arrays: a retry would keep them
// twice, as Put); the others are retried as RetryOptions says, each Sink getting every byte once.
#include "gpuscan/resident_ops.h"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>

#include "raw_messages.h"
#include "retry.h"
#include "stream_driver.h"
#include "typed_support.h"

namespace gpuscan {

using detail::VectorSink;

namespace {

constexpr const char* kScan2DMethod = "/gpuscan.v1.GpuScan/Scan2D";

// One call of a scan-like RPC (Scan, SegmentedScan, Scan2D) on resident inputs: the header alone
// (RunBidi half-closes after it), the results' data to `out` in whole elements of `out_size`
// bytes; returns the final response (timing, and with keep the kept array's info), without data.
template <class Req, class Header>
v1::ScanResponse ResidentScanOnce(const std::shared_ptr<grpc::Channel>& channel, grpc::ClientContext& ctx,
                                  const char* method, const Header& header, size_t out_size, const Sink& out) {
  auto stream = detail::RawBidi<Req, v1::ScanResponse>(channel, method, &ctx);
  v1::ScanResponse last;
  auto write_all = [&] {
    detail::RawOut<Req> req;
    *req.msg.mutable_header() = header;
    stream->Write(req);
  };
  auto read_all = [&] {
    detail::ElementFeeder feeder(out, std::max<size_t>(out_size, 1), /*gather=*/true);
    detail::RawIn<v1::ScanResponse> resp;
    while (stream->Read(&resp)) {
      if (resp.data_bytes()) feeder.Feed(resp.split.field);
      if (resp.has_timing() || resp.msg.has_array()) last = resp.msg;
    }
  };
  detail::RunBidi(ctx, *stream, write_all, read_all);
  return last;
}

// No input: the header names the arrays (a Replay for the retried forms of the streamed calls).
Source NoInput() { return Source{}; }

}  // namespace

// The scan-like calls: one try when keeping, else retried with the Sink resumed.
#define GPUSCAN_RESIDENT_SCAN_LIKE(Name, Req, Header, method, out_size)                                    \
  v1::ScanResponse Client::Name(const Header& header, Sink out) {                                          \
    if (header.resident().keep()) {                                                                        \
      auto ctx = NewContext();                                                                             \
      return ResidentScanOnce<Req>(channel_, *ctx, method, header, out_size, out);                         \
    }                                                                                                      \
    detail::ResumingSink resume(std::move(out));                                                           \
    return detail::WithRetries(options_, *calls_, [&] {                                                    \
      auto ctx = NewContext();                                                                             \
      return ResidentScanOnce<Req>(channel_, *ctx, method, header, out_size, resume.NextAttempt());       \
    });                                                                                                    \
  }
GPUSCAN_RESIDENT_SCAN_LIKE(ScanResident, v1::ScanRequest, v1::ScanHeader, detail::kScanMethod, ScanOutputSize(header))
GPUSCAN_RESIDENT_SCAN_LIKE(SegmentedScanResident, v1::SegmentedScanRequest, v1::SegmentedScanHeader,
                           detail::kSegmentedScanMethod, ScanOutputSize(header.dtype(), header.output_dtype()))
GPUSCAN_RESIDENT_SCAN_LIKE(Scan2DResident, v1::Scan2DRequest, v1::Scan2DHeader, kScan2DMethod,
                           ScanOutputSize(header.dtype(), header.output_dtype()))
#undef GPUSCAN_RESIDENT_SCAN_LIKE

v1::HistogramResponse Client::HistogramResident(const v1::HistogramHeader& header) {
  return detail::WithRetries(options_, *calls_, [&] { return HistogramHeaderOnly(header); });
}

v1::CompactResponse Client::CompactResident(const v1::CompactHeader& header, Sink values_out, Sink indices_out) {
  if (header.resident().keep()) return CompactStream(header, Source{}, Source{}, values_out, indices_out, {}, 1);
  return CompactStream(header, NoInput, NoInput, std::move(values_out), std::move(indices_out), {}, 1);
}

v1::ReduceByKeyResponse Client::ReduceByKeyResident(const v1::ReduceByKeyHeader& header, Sink keys_out,
                                                     Sink values_out) {
  if (header.resident().keep()) return ReduceByKeyStream(header, Source{}, Source{}, keys_out, values_out);
  return ReduceByKeyStream(header, NoInput, NoInput, std::move(keys_out), std::move(values_out));
}

v1::SortResponse Client::SortResident(const v1::SortHeader& header, Sink keys_out, Sink values_out,
                                      Sink indices_out) {
  if (header.resident().keep()) return SortStream(header, Source{}, Source{}, keys_out, values_out, indices_out);
  return SortStream(header, NoInput, NoInput, std::move(keys_out), std::move(values_out), std::move(indices_out));
}

// -- the typed forms (resident_ops.h)
namespace {

// The Client of a call's inputs: in's, which `other` (the flags, keys or sort values, if any)
// must share, with as many elements.
Client& ClientOf(const RemoteArray& in, const char* op, const RemoteArray* other = nullptr) {
  if (!in) throw std::invalid_argument(std::string("gpuscan: ") + op + " of an empty RemoteArray");
  if (other) {
    if (!*other) throw std::invalid_argument(std::string("gpuscan: ") + op + ": an input is an empty RemoteArray");
    if (other->client() != in.client()) {
      throw std::invalid_argument(std::string("gpuscan: ") + op + ": the inputs are RemoteArrays of different Clients");
    }
    if (other->size() != in.size()) {
      throw std::invalid_argument(std::string("gpuscan: ") + op + ": an input holds " + std::to_string(other->size()) +
                                  " elements, the values " + std::to_string(in.size()));
    }
  }
  return *in.client();
}

bool Narrow(v1::DType d) { return DTypeSize(d) < 4; }

void CheckHolds(const RemoteArray& a, v1::DType want, const char* what) {
  if (a.dtype() != want) {
    throw std::invalid_argument(std::string("gpuscan: ") + what + " holds " + v1::DType_Name(a.dtype()) + ", not " +
                                v1::DType_Name(want));
  }
}

// A scan's or ReduceByKey's values: T their dtype, or a narrow array's accumulator (output_dtype).
template <class T, class Header>
void SetAccumulator(Header& header, const RemoteArray& in) {
  if (Narrow(in.dtype())) {
    header.set_output_dtype(DTypeOf<T>());
  } else {
    CheckHolds(in, DTypeOf<T>(), "the resident array");
  }
}


void SetKeep(v1::Resident* r, const ResidentOptions& keep) {
  r->set_keep(true);
  r->set_ttl_ms(static_cast<uint64_t>(std::max<int64_t>(0, keep.ttl.count())));
  r->set_label(keep.label);
}

RemoteArray KeptOrEmpty(Client& client, bool has, const v1::ArrayInfo& info) {
  return has ? RemoteArray(client, info) : RemoteArray();
}

RemoteArray KeptScan(Client& client, const v1::ScanResponse& last) {
  if (!last.has_array()) {
    throw RpcError(grpc::StatusCode::DATA_LOSS, "gpuscan: a kept scan's final response carries no ArrayInfo");
  }
  return RemoteArray(client, last.array());
}

// The typed scans' results: the values read back, as many as the array holds.
template <class T, class Call>
ScanResult<T> ScanValues(size_t n, Call&& call) {
  ScanResult<T> result;
  result.values.reserve(n);
  VectorSink<T> sink(result.values);
  result.timing = FromProto(call([&sink](const void* p, size_t b) { sink(p, b); }).timing());
  sink.Check();
  if (result.values.size() != n) {
    throw RpcError(grpc::StatusCode::DATA_LOSS, "gpuscan: the server sent " + std::to_string(result.values.size()) +
                                                    " of " + std::to_string(n) + " results");
  }
  return result;
}

v1::CompactHeader CompactHeaderOf(const RemoteArray& in, const CompactOptions& options, const RemoteArray* flags) {
  if (!options.flags.empty()) {
    throw std::invalid_argument("gpuscan: Compact of a RemoteArray takes its flags as a RemoteArray (options.flags "
                                "holds host flags)");
  }
  if (options.lanes > 1 || options.shards > 1) {
    throw std::invalid_argument("gpuscan: a resident array is compacted by one call on its server (no lanes, shards)");
  }
  ClientOf(in, "Compact", flags);
  if (!flags && options.use_flags) {
    throw std::invalid_argument("gpuscan: Compact with use_flags of a RemoteArray needs its flags RemoteArray");
  }
  v1::CompactHeader header = detail::CompactHeaderFor(in.dtype(), options);
  header.set_element_count(in.size());
  header.mutable_resident()->set_values(in.id());
  if (flags) {
    header.set_use_flags(true);
    header.mutable_resident()->set_flags(flags->id());
  }
  return header;
}

v1::SegmentedScanHeader SegmentedHeaderOf(const RemoteArray& in, const RemoteArray& segments, bool heads,
                                          const SegmentedScanOptions& options) {
  ClientOf(in, "SegmentedScan", &segments);
  v1::SegmentedScanHeader header = detail::ScanKindHeader<v1::SegmentedScanHeader>(in.dtype(), options);
  header.set_element_count(in.size());
  header.mutable_resident()->set_values(in.id());
  if (heads) {
    header.set_heads(true);
    header.mutable_resident()->set_flags(segments.id());
  } else {
    header.set_key_dtype(segments.dtype());
    header.mutable_resident()->set_keys(segments.id());
  }
  return header;
}

v1::ReduceByKeyHeader ByKeyHeaderOf(const RemoteArray& in, const RemoteArray& keys, v1::Operator op) {
  ClientOf(in, "ReduceByKey", &keys);
  v1::ReduceByKeyHeader header;
  header.set_dtype(in.dtype());
  header.set_op(op);
  header.set_key_dtype(keys.dtype());
  header.set_element_count(in.size());
  header.mutable_resident()->set_values(in.id());
  header.mutable_resident()->set_keys(keys.id());
  return header;
}

v1::SortHeader SortHeaderOf(const RemoteArray& keys, const RemoteArray* values, v1::SortOutput output,
                            bool descending) {
  if ((values != nullptr) != (output == v1::SORT_OUTPUT_KEYS_AND_VALUES)) {
    throw std::invalid_argument("gpuscan: Sort of RemoteArrays: values go with (and only with) KEYS_AND_VALUES");
  }
  ClientOf(keys, "Sort", values);
  v1::SortHeader header;
  header.set_dtype(keys.dtype());
  header.set_descending(descending);
  header.set_output(output);
  header.set_element_count(keys.size());
  header.mutable_resident()->set_values(keys.id());
  if (values) {
    header.set_values_dtype(values->dtype());
    header.mutable_resident()->set_sort_values(values->id());
  }
  return header;
}

v1::Scan2DHeader MatrixHeaderOf(const RemoteArray& in, uint64_t cols, v1::Operator op, int axis, bool exclusive) {
  Client& client = ClientOf(in, axis < 0 ? "Scan2D" : "ScanAlong");
  if (cols == 0 || in.size() % cols) {
    throw std::invalid_argument("gpuscan: a resident array of " + std::to_string(in.size()) + " elements is no matrix of " +
                                std::to_string(cols) + " columns");
  }
  v1::Scan2DHeader header;
  header.set_dtype(in.dtype());
  header.set_op(op);
  header.set_cols(cols);
  header.set_rows(in.size() / cols);
  header.mutable_resident()->set_values(in.id());
  if (axis >= 0) {
    if (axis > 1) throw std::invalid_argument("gpuscan: ScanAlong axis " + std::to_string(axis) + " of a matrix: 0 or 1");
    if (!client.ServesOperation("scan_axis")) {
      throw RpcError(grpc::StatusCode::UNIMPLEMENTED, "the server does not serve scans along an axis (no \"scan_axis\" in "
                                                      "ServerInfo.operations: an older version)");
    }
    header.set_axis(axis == 0 ? v1::SCAN_AXIS_COLUMNS : v1::SCAN_AXIS_ROWS);
    header.set_kind(exclusive ? v1::SCAN_KIND_EXCLUSIVE : v1::SCAN_KIND_INCLUSIVE);
  }
  return header;
}

}  // namespace

HistogramResult Histogram(const RemoteArray& in, const HistogramBins& bins) {
  Client& client = ClientOf(in, "Histogram");
  v1::HistogramHeader header = HistogramHeaderFor(in.dtype(), bins);
  header.set_element_count(in.size());
  header.mutable_resident()->set_values(in.id());
  return ToHistogramResult(client.HistogramResident(header));
}

template <class T>
CompactResult<T> Compact(const RemoteArray& in, const CompactOptions& options, const RemoteArray* flags) {
  const v1::CompactHeader header = CompactHeaderOf(in, options, flags);
  CheckHolds(in, DTypeOf<T>(), "the resident array");
  CompactResult<T> result;
  VectorSink<T> values(result.values);
  VectorSink<int64_t> indices(result.indices);
  const v1::CompactResponse last = in.client()->CompactResident(
      header, [&values](const void* p, size_t b) { values(p, b); }, [&indices](const void* p, size_t b) { indices(p, b); });
  values.Check();
  indices.Check();
  result.kept_count = last.kept_count();
  result.timing = FromProto(last.timing());
  return result;
}

KeptArrays Compact(const RemoteArray& in, const CompactOptions& options, const RemoteArray* flags,
                   const ResidentOptions& keep) {
  v1::CompactHeader header = CompactHeaderOf(in, options, flags);
  SetKeep(header.mutable_resident(), keep);
  const v1::CompactResponse last = in.client()->CompactResident(header);
  KeptArrays kept;
  kept.values = KeptOrEmpty(*in.client(), last.has_values_array(), last.values_array());
  kept.indices = KeptOrEmpty(*in.client(), last.has_indices_array(), last.indices_array());
  kept.count = last.kept_count();
  kept.timing = FromProto(last.timing());
  return kept;
}

template <class T>
ScanResult<T> SegmentedScan(const RemoteArray& in, const RemoteArray& keys, const SegmentedScanOptions& options) {
  v1::SegmentedScanHeader header = SegmentedHeaderOf(in, keys, false, options);
  SetAccumulator<T>(header, in);
  return ScanValues<T>(in.size(), [&](Sink s) { return in.client()->SegmentedScanResident(header, std::move(s)); });
}

template <class T>
ScanResult<T> SegmentedScanHeads(const RemoteArray& in, const RemoteArray& heads, const SegmentedScanOptions& options) {
  v1::SegmentedScanHeader header = SegmentedHeaderOf(in, heads, true, options);
  SetAccumulator<T>(header, in);
  return ScanValues<T>(in.size(), [&](Sink s) { return in.client()->SegmentedScanResident(header, std::move(s)); });
}

RemoteArray SegmentedScan(const RemoteArray& in, const RemoteArray& keys, const SegmentedScanOptions& options,
                          const ResidentOptions& keep) {
  v1::SegmentedScanHeader header = SegmentedHeaderOf(in, keys, false, options);
  SetKeep(header.mutable_resident(), keep);
  return KeptScan(*in.client(), in.client()->SegmentedScanResident(header));
}

RemoteArray SegmentedScanHeads(const RemoteArray& in, const RemoteArray& heads, const SegmentedScanOptions& options,
                               const ResidentOptions& keep) {
  v1::SegmentedScanHeader header = SegmentedHeaderOf(in, heads, true, options);
  SetKeep(header.mutable_resident(), keep);
  return KeptScan(*in.client(), in.client()->SegmentedScanResident(header));
}

template <class T, class K>
ReduceByKeyResult<T, K> ReduceByKey(const RemoteArray& in, const RemoteArray& keys, v1::Operator op) {
  v1::ReduceByKeyHeader header = ByKeyHeaderOf(in, keys, op);
  SetAccumulator<T>(header, in);
  ReduceByKeyResult<T, K> result;
  VectorSink<K> keys_sink(result.keys);
  VectorSink<T> values_sink(result.values);
  const v1::ReduceByKeyResponse last = in.client()->ReduceByKeyResident(
      header, [&keys_sink](const void* p, size_t b) { keys_sink(p, b); },
      [&values_sink](const void* p, size_t b) { values_sink(p, b); });
  keys_sink.Check();
  values_sink.Check();
  if (result.keys.size() != last.run_count() || result.values.size() != last.run_count()) {
    throw RpcError(grpc::StatusCode::DATA_LOSS, "gpuscan: the server sent " + std::to_string(result.keys.size()) +
                                                    " keys and " + std::to_string(result.values.size()) + " values for " +
                                                    std::to_string(last.run_count()) + " runs (K: the keys' dtype?)");
  }
  result.timing = FromProto(last.timing());
  return result;
}

KeptArrays ReduceByKey(const RemoteArray& in, const RemoteArray& keys, v1::Operator op, const ResidentOptions& keep) {
  v1::ReduceByKeyHeader header = ByKeyHeaderOf(in, keys, op);
  SetKeep(header.mutable_resident(), keep);
  const v1::ReduceByKeyResponse last = in.client()->ReduceByKeyResident(header);
  KeptArrays kept;
  kept.keys = KeptOrEmpty(*in.client(), last.has_keys_array(), last.keys_array());
  kept.values = KeptOrEmpty(*in.client(), last.has_values_array(), last.values_array());
  kept.count = last.run_count();
  kept.timing = FromProto(last.timing());
  return kept;
}

namespace {

template <class T, class V>
SortResult<T, V> SortValues(const RemoteArray& keys, const RemoteArray* values, v1::SortOutput output,
                            bool descending) {
  const v1::SortHeader header = SortHeaderOf(keys, values, output, descending);
  CheckHolds(keys, DTypeOf<T>(), "the resident keys");
  if (values) CheckHolds(*values, DTypeOf<V>(), "the resident values");
  SortResult<T, V> result;
  VectorSink<T> k(result.keys);
  VectorSink<V> v(result.values);
  VectorSink<int64_t> i(result.indices);
  const v1::SortResponse last = keys.client()->SortResident(
      header, [&k](const void* p, size_t b) { k(p, b); }, [&v](const void* p, size_t b) { v(p, b); },
      [&i](const void* p, size_t b) { i(p, b); });
  k.Check();
  v.Check();
  i.Check();
  if (last.element_count() != keys.size()) {
    throw RpcError(grpc::StatusCode::DATA_LOSS, "gpuscan: the server sorted " + std::to_string(last.element_count()) +
                                                    " of " + std::to_string(keys.size()) + " elements");
  }
  result.timing = FromProto(last.timing());
  return result;
}

}  // namespace

template <class T>
SortResult<T> Sort(const RemoteArray& keys, bool descending) {
  return SortValues<T, T>(keys, nullptr, v1::SORT_OUTPUT_KEYS, descending);
}

template <class T>
SortResult<T> Argsort(const RemoteArray& keys, bool descending) {
  return SortValues<T, T>(keys, nullptr, v1::SORT_OUTPUT_INDICES, descending);
}

template <class T, class V>
SortResult<T, V> SortPairs(const RemoteArray& keys, const RemoteArray& values, bool descending) {
  return SortValues<T, V>(keys, &values, v1::SORT_OUTPUT_KEYS_AND_VALUES, descending);
}

KeptArrays Sort(const RemoteArray& keys, const RemoteArray* values, v1::SortOutput output, bool descending,
                const ResidentOptions& keep) {
  v1::SortHeader header = SortHeaderOf(keys, values, output, descending);
  SetKeep(header.mutable_resident(), keep);
  Client& client = *keys.client();
  const v1::SortResponse last = client.SortResident(header);
  KeptArrays kept;
  kept.keys = KeptOrEmpty(client, last.has_keys_array(), last.keys_array());
  kept.values = KeptOrEmpty(client, last.has_values_array(), last.values_array());
  kept.indices = KeptOrEmpty(client, last.has_indices_array(), last.indices_array());
  kept.count = last.element_count();
  kept.timing = FromProto(last.timing());
  return kept;
}

template <class T>
ScanResult<T> Scan2D(const RemoteArray& in, uint64_t cols, v1::Operator op) {
  v1::Scan2DHeader header = MatrixHeaderOf(in, cols, op, -1, false);
  SetAccumulator<T>(header, in);
  return ScanValues<T>(in.size(), [&](Sink s) { return in.client()->Scan2DResident(header, std::move(s)); });
}

RemoteArray Scan2D(const RemoteArray& in, uint64_t cols, v1::Operator op, const ResidentOptions& keep) {
  v1::Scan2DHeader header = MatrixHeaderOf(in, cols, op, -1, false);
  SetKeep(header.mutable_resident(), keep);
  return KeptScan(*in.client(), in.client()->Scan2DResident(header));
}

template <class T>
ScanResult<T> ScanAlong(const RemoteArray& in, uint64_t cols, int axis, v1::Operator op, bool exclusive) {
  if (axis < 0) throw std::invalid_argument("gpuscan: ScanAlong axis " + std::to_string(axis) + " of a matrix: 0 or 1");
  v1::Scan2DHeader header = MatrixHeaderOf(in, cols, op, axis, exclusive);
  SetAccumulator<T>(header, in);
  return ScanValues<T>(in.size(), [&](Sink s) { return in.client()->Scan2DResident(header, std::move(s)); });
}

RemoteArray ScanAlong(const RemoteArray& in, uint64_t cols, int axis, v1::Operator op, bool exclusive,
                      const ResidentOptions& keep) {
  if (axis < 0) throw std::invalid_argument("gpuscan: ScanAlong axis " + std::to_string(axis) + " of a matrix: 0 or 1");
  v1::Scan2DHeader header = MatrixHeaderOf(in, cols, op, axis, exclusive);
  SetKeep(header.mutable_resident(), keep);
  return KeptScan(*in.client(), in.client()->Scan2DResident(header));
}

#define GPUSCAN_RESIDENT_OPS_KEYED(T, K)                                                                    \
  template ReduceByKeyResult<T, K> ReduceByKey<T, K>(const RemoteArray&, const RemoteArray&, v1::Operator); \
  template SortResult<T, K> SortPairs<T, K>(const RemoteArray&, const RemoteArray&, bool);
#define GPUSCAN_RESIDENT_OPS_VALUES(T, V) template SortResult<T, V> SortPairs<T, V>(const RemoteArray&, const RemoteArray&, bool);
#define GPUSCAN_RESIDENT_OPS(T)                                                                                   \
  template CompactResult<T> Compact<T>(const RemoteArray&, const CompactOptions&, const RemoteArray*);            \
  template ScanResult<T> SegmentedScan<T>(const RemoteArray&, const RemoteArray&, const SegmentedScanOptions&);   \
  template ScanResult<T> SegmentedScanHeads<T>(const RemoteArray&, const RemoteArray&,                           \
                                               const SegmentedScanOptions&);                                      \
  template SortResult<T> Sort<T>(const RemoteArray&, bool);                                                       \
  template SortResult<T> Argsort<T>(const RemoteArray&, bool);                                                    \
  template ScanResult<T> Scan2D<T>(const RemoteArray&, uint64_t, v1::Operator);                                   \
  template ScanResult<T> ScanAlong<T>(const RemoteArray&, uint64_t, int, v1::Operator, bool);                     \
  GPUSCAN_RESIDENT_OPS_KEYED(T, int32_t)                                                                          \
  GPUSCAN_RESIDENT_OPS_KEYED(T, int64_t)                                                                          \
  GPUSCAN_RESIDENT_OPS_KEYED(T, uint32_t)                                                                         \
  GPUSCAN_RESIDENT_OPS_KEYED(T, uint64_t)                                                                         \
  GPUSCAN_RESIDENT_OPS_VALUES(T, float)                                                                           \
  GPUSCAN_RESIDENT_OPS_VALUES(T, double)
GPUSCAN_FOR_EACH_ELEMENT_TYPE(GPUSCAN_RESIDENT_OPS)
#undef GPUSCAN_RESIDENT_OPS
#undef GPUSCAN_RESIDENT_OPS_KEYED
#undef GPUSCAN_RESIDENT_OPS_VALUES

}  // namespace gpuscan
