// The bad-input matrix's rows and what builds them, shared by its files:
// invalid_input_test.cc (the fixture and the tests, which run every row) and the rows by family,
// invalid_input_stream_rows.cc (the stream and header checks of Scan, Reduce and Compact),
// invalid_input_transport_rows.cc (lanes, shared memory, device memory) and
// invalid_input_op_rows.cc (Histogram, SegmentedScan, ReduceByKey, Sort, Scan2D, narrow dtypes),
// invalid_input_resident_rows.cc (PutArray, GetArray, DropArray, ListArrays, Scan's and Reduce's
// header.resident), invalid_input_resident_memory_rows.cc (PutArray's and GetArray's shared_memory
// and device_memory), invalid_input_resident_keyed_rows.cc (header.resident of SegmentedScan,
// ReduceByKey and Scan2D), invalid_input_resident_select_rows.cc (Compact's, Histogram's and
// Sort's header.resident) and invalid_input_pipeline_rows.cc (Pipeline).
// A named namespace, not an anonymous one: the files share these, and the unity build puts some
// of them in one translation unit with the other integration tests.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ostream>
#include <random>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "test_server.h"

namespace gpuscan::matrix {

constexpr uint64_t kChunkBytes = 4096;
constexpr uint64_t kMaxRequestBytes = 64 * 1024;
// Resident arrays: every tenant's together, and each tenant's (the valid calls' arrays are ~12 KiB).
constexpr uint64_t kResidentBytes = 256 * 1024;
constexpr uint64_t kTenantQuotaBytes = 128 * 1024;
constexpr auto kInvalid = grpc::StatusCode::INVALID_ARGUMENT;
constexpr auto kExhausted = grpc::StatusCode::RESOURCE_EXHAUSTED;
constexpr auto kUnimplemented = grpc::StatusCode::UNIMPLEMENTED;

// Payload bytes: never zero, so nothing passes by accident of an all-zero pattern.
inline std::string Bytes(size_t n) { return std::string(n, '\x03'); }

// The regions the shared-memory rows name, in a directory of their own (made once per process):
// "in64" and "out64" 64 bytes, "small" 8 bytes, "flags16" 16 bytes, a directory "dir" and a symlink "link".
inline const std::string& MatrixShmDir() {
  static const std::string dir = [] {
    char pattern[] = "/tmp/gpuscan-matrix-shm-XXXXXX";
    if (!mkdtemp(pattern)) return std::string("/nonexistent");
    const std::string d = pattern;
    for (const auto& [name, bytes] : {std::pair{"in64", 64}, std::pair{"out64", 64}, std::pair{"small", 8}, std::pair{"flags16", 16}}) {
      const int fd = open((d + "/" + name).c_str(), O_CREAT | O_RDWR, 0600);
      if (fd >= 0 && write(fd, Bytes(bytes).data(), bytes) != bytes) std::perror("write");
      if (fd >= 0) close(fd);
    }
    mkdir((d + "/dir").c_str(), 0700);
    if (symlink((d + "/in64").c_str(), (d + "/link").c_str()) != 0) std::perror("symlink");
    // Each test process makes its own: leave nothing behind. (A copy: `dir` is gone by then.)
    static char made[sizeof pattern];
    std::memcpy(made, pattern, sizeof pattern);
    std::atexit([] {
      const std::string d = made;
      for (const char* name : {"in64", "out64", "small", "flags16", "link"}) unlink((d + "/" + name).c_str());
      rmdir((d + "/dir").c_str());
      rmdir(d.c_str());
    });
    return d;
  }();
  return dir;
}

inline server::ServerOptions MatrixServerOptions() {
  server::ServerOptions o;
  o.shm_dir = MatrixShmDir();
  o.chunk_bytes = kChunkBytes;
  o.max_request_bytes = kMaxRequestBytes;
  o.lane_wait = std::chrono::milliseconds(300);  // the missing-lane row waits this long
  o.resident_bytes = kResidentBytes;               // resident arrays are served (PutArray, header.resident)
  o.tenant_quota_bytes = kTenantQuotaBytes;
  return o;
}
inline const uint64_t kReceiveLimit = server::MaxReceiveMessageBytes(MatrixServerOptions());

enum class Rpc {
  kScan, kReduce, kCompact, kHistogram, kSegmented, kReduceByKey, kSort, kScan2D,
  kPutArray, kGetArray, kDropArray, kListArrays, kPipeline
};

// A Pipeline row's stage input id that the runner prepares (Row::same_epoch, Row::foreign_id):
// every stage input whose id is this one gets this run's epoch, or becomes the default tenant's
// array (16 INT32 elements).
inline const std::string kPreparedStageId = std::string(16, '\x6b') + std::string(8, '\0');

struct Row {
  std::string name;
  Rpc rpc = Rpc::kScan;
  // The requests of the one RPC the row drives (the others stay empty).
  std::vector<v1::ScanRequest> scan;
  std::vector<v1::ReduceRequest> reduce;
  std::vector<v1::CompactRequest> compact;
  std::vector<v1::HistogramRequest> histogram;
  std::vector<v1::SegmentedScanRequest> segmented;
  std::vector<v1::ReduceByKeyRequest> by_key;
  std::vector<v1::SortRequest> sort;
  std::vector<v1::Scan2DRequest> scan2d;
  std::vector<v1::PutArrayRequest> put;
  std::vector<v1::PipelineRequest> pipeline;
  v1::GetArrayRequest get;    // GetArray's one request
  v1::DropArrayRequest drop;  // DropArray's one request
  v1::ListArraysRequest list;  // ListArrays' one request
  // Request metadata of the call (gpuscan-tenant).
  std::vector<std::pair<std::string, std::string>> metadata;
  // Scan, Reduce and PutArray rows: request messages as raw bytes (malformed encodings), sent instead.
  std::vector<std::string> raw;
  grpc::StatusCode code = kInvalid;
  std::vector<std::string> expect;  // substrings of the message: the field and the value
  // Set the header's algorithm to one this server's engine lacks (and expect its name).
  bool missing_algorithm = false;
  // The resident id of the row (header.resident.values, or GetArray's / DropArray's id) gets this
  // server run's epoch as its last 8 bytes: an id of this run that names no array.
  bool same_epoch = false;
  // That id becomes the id of an array the default tenant holds (the row runs as another tenant:
  // the runner checks that the array is still there after the row). A Pipeline row that runs as
  // the default tenant names that array as its own: 16 INT32 elements on the server.
  bool foreign_id = false;
};

// Test names and failure messages show a row by its name.
inline void PrintTo(const Row& row, std::ostream* os) { *os << row.name; }

// ---- request builders, one set per RPC; C = the request type
inline v1::ScanRequest ScanHead(v1::DType dtype = v1::DTYPE_INT32, int op = v1::OPERATOR_SUM) {
  v1::ScanRequest r;
  r.mutable_header()->set_dtype(dtype);
  r.mutable_header()->set_op(static_cast<v1::Operator>(op));
  return r;
}
inline v1::ReduceRequest ReduceHead(v1::DType dtype = v1::DTYPE_INT32, int op = v1::OPERATOR_SUM) {
  v1::ReduceRequest r;
  r.mutable_header()->set_dtype(dtype);
  r.mutable_header()->set_op(static_cast<v1::Operator>(op));
  return r;
}
inline v1::CompactRequest CompactHead(v1::DType dtype = v1::DTYPE_INT32, bool use_flags = true) {
  v1::CompactRequest r;
  r.mutable_header()->set_dtype(dtype);
  if (use_flags) {
    r.mutable_header()->set_use_flags(true);
  } else {
    r.mutable_header()->mutable_predicate()->set_op(v1::PREDICATE_OP_NONZERO);
  }
  return r;
}
inline v1::CompactRequest CompactPredicate(v1::DType dtype, v1::PredicateOp op) {
  v1::CompactRequest r = CompactHead(dtype, false);
  r.mutable_header()->mutable_predicate()->set_op(op);
  return r;
}

template <class C>
C Head(v1::DType dtype = v1::DTYPE_INT32);
template <>
inline v1::ScanRequest Head(v1::DType dtype) { return ScanHead(dtype); }
template <>
inline v1::ReduceRequest Head(v1::DType dtype) { return ReduceHead(dtype); }
// Compact rows that are not about flags select by predicate, so values alone are well formed.
template <>
inline v1::CompactRequest Head(v1::DType dtype) { return CompactHead(dtype, false); }

template <class C>
C Data(size_t bytes) {
  C r;
  if constexpr (std::is_same_v<C, v1::CompactRequest>) {
    r.set_values(Bytes(bytes));
  } else {
    r.set_data(Bytes(bytes));
  }
  return r;
}
inline v1::CompactRequest ValuesAndFlags(size_t elements, size_t flags, size_t element_size = 4) {
  v1::CompactRequest r;
  r.set_values(Bytes(elements * element_size));
  r.set_flags(Bytes(flags));
  return r;
}

template <class C>
C WithData(C r, size_t bytes) {
  const C d = Data<C>(bytes);
  r.MergeFrom(d);
  return r;
}
template <class C>
C WithCount(C r, uint64_t count) {
  r.mutable_header()->set_element_count(count);
  return r;
}
// The header of request `r` with a raw (maybe unknown) dtype value.
template <class C>
C WithDType(C r, int dtype) {
  r.mutable_header()->set_dtype(static_cast<v1::DType>(dtype));
  return r;
}
template <class C>
const char* Field() {
  return std::is_same_v<C, v1::CompactRequest> ? "values" : "data";
}

// Which RPC a request type drives and where a Row keeps its requests: MakeRow's one table.
template <class C>
struct Slot;
template <> struct Slot<v1::ScanRequest> { static constexpr const char* kPrefix = "Scan_"; static constexpr Rpc kRpc = Rpc::kScan; static constexpr auto kField = &Row::scan; };
template <> struct Slot<v1::ReduceRequest> { static constexpr const char* kPrefix = "Reduce_"; static constexpr Rpc kRpc = Rpc::kReduce; static constexpr auto kField = &Row::reduce; };
template <> struct Slot<v1::CompactRequest> { static constexpr const char* kPrefix = "Compact_"; static constexpr Rpc kRpc = Rpc::kCompact; static constexpr auto kField = &Row::compact; };
template <> struct Slot<v1::HistogramRequest> { static constexpr const char* kPrefix = "Histogram_"; static constexpr Rpc kRpc = Rpc::kHistogram; static constexpr auto kField = &Row::histogram; };
template <> struct Slot<v1::SegmentedScanRequest> { static constexpr const char* kPrefix = "SegmentedScan_"; static constexpr Rpc kRpc = Rpc::kSegmented; static constexpr auto kField = &Row::segmented; };
template <> struct Slot<v1::ReduceByKeyRequest> { static constexpr const char* kPrefix = "ReduceByKey_"; static constexpr Rpc kRpc = Rpc::kReduceByKey; static constexpr auto kField = &Row::by_key; };
template <> struct Slot<v1::SortRequest> { static constexpr const char* kPrefix = "Sort_"; static constexpr Rpc kRpc = Rpc::kSort; static constexpr auto kField = &Row::sort; };
template <> struct Slot<v1::Scan2DRequest> { static constexpr const char* kPrefix = "Scan2D_"; static constexpr Rpc kRpc = Rpc::kScan2D; static constexpr auto kField = &Row::scan2d; };
template <> struct Slot<v1::PutArrayRequest> { static constexpr const char* kPrefix = "PutArray_"; static constexpr Rpc kRpc = Rpc::kPutArray; static constexpr auto kField = &Row::put; };
template <> struct Slot<v1::PipelineRequest> { static constexpr const char* kPrefix = "Pipeline_"; static constexpr Rpc kRpc = Rpc::kPipeline; static constexpr auto kField = &Row::pipeline; };

// A row of the RPC that requests of type C drive, named "<Rpc>_<name>".
template <class C>
Row MakeRow(std::string name, std::vector<C> requests, grpc::StatusCode code, std::vector<std::string> expect) {
  Row row{Slot<C>::kPrefix + name, Slot<C>::kRpc};
  row.*Slot<C>::kField = std::move(requests);
  row.code = code;
  row.expect = std::move(expect);
  return row;
}

template <class C>
struct Tag {
  using type = C;
};

// Adds the row for Scan, Reduce and Compact: make(Tag<C>{}) builds the requests of type C;
// "$F" in an expected substring stands for the bytes field ("data", or "values" for Compact).
template <class Make>
void ForEveryRpc(std::vector<Row>& rows, const std::string& name, grpc::StatusCode code,
                 const std::vector<std::string>& expect, Make make) {
  auto fill = [&](const char* field) {
    std::vector<std::string> e = expect;
    for (std::string& s : e) {
      if (auto at = s.find("$F"); at != std::string::npos) s.replace(at, 2, field);
    }
    return e;
  };
  rows.push_back(MakeRow(name, make(Tag<v1::ScanRequest>{}), code, fill("data")));
  rows.push_back(MakeRow(name, make(Tag<v1::ReduceRequest>{}), code, fill("data")));
  rows.push_back(MakeRow(name, make(Tag<v1::CompactRequest>{}), code, fill("values")));
}

// ---- striped lanes (header.lanes): one lane's header or chunks; the failures that need
// several lanes are in lanes_test.cc
template <class C>
C WithLanes(C r, uint32_t lane, uint32_t count, uint64_t chunk_elements, size_t id_bytes = 16) {
  static std::mt19937_64 rng{std::random_device{}()};
  std::string id(id_bytes, '\0');
  for (char& c : id) c = static_cast<char>(rng() | 1);  // a fresh id per row
  v1::Lanes* l = r.mutable_header()->mutable_lanes();
  l->set_array_id(id);
  l->set_lane(lane);
  l->set_lane_count(count);
  l->set_chunk_elements(chunk_elements);
  return r;
}

// ---- shared memory (header.shared_memory): regions of MatrixShmDir(); results and the
// region-shrinks case are in shared_memory_test.cc
template <class C>
C WithShm(C r, const std::string& region, uint64_t bytes = 64) {
  v1::SharedMemory* m = r.mutable_header()->mutable_shared_memory();
  m->set_region(region);
  m->set_bytes(bytes);
  if constexpr (std::is_same_v<C, v1::CompactRequest>) {
    if (r.header().output() != v1::COMPACT_OUTPUT_INDICES) m->set_output_region("out64");
  }
  return r;
}

// ---- device memory (header.device_memory): this matrix's server has no --allow-device-ipc, so
// every well-formed header gets FAILED_PRECONDITION; what the header alone shows comes first.
// The calls on real handles (CUDA IPC) are in python/tests/test_device_ipc_*.py and the unit
// test of the handles (tests/unit/device_memory_test.cc).
template <class C>
C WithDevice(C r, uint64_t bytes = 64) {
  v1::DeviceMemory* m = r.mutable_header()->mutable_device_memory();
  m->set_device_uuid(std::string(16, '\x5a'));
  m->set_handle(std::string(64, '\x11'));
  m->set_bytes(bytes);
  if constexpr (std::is_same_v<C, v1::CompactRequest>) {
    if (r.header().output() != v1::COMPACT_OUTPUT_INDICES) m->set_output_handle(std::string(64, '\x22'));
  }
  return r;
}

// ---- device memory on Histogram and Sort (this matrix's server: no --allow-device-ipc)
template <class C>
C WithDeviceInput(C r, uint64_t bytes = 64) {
  v1::DeviceMemory* m = r.mutable_header()->mutable_device_memory();
  m->set_device_uuid(std::string(16, '\x5a'));
  m->set_handle(std::string(64, '\x11'));
  m->set_bytes(bytes);
  return r;
}

// ---- Histogram: the bins (header.bins, lo, hi or header.edges) and the stream checks every
// call has
inline v1::HistogramRequest HistogramHead(v1::DType dtype = v1::DTYPE_FLOAT32, uint32_t bins = 16, double lo = 0,
                                   double hi = 1) {
  v1::HistogramRequest r;
  r.mutable_header()->set_dtype(dtype);
  r.mutable_header()->set_bins(bins);
  r.mutable_header()->set_lo(lo);
  r.mutable_header()->set_hi(hi);
  return r;
}
inline v1::HistogramRequest HistogramEdges(std::vector<double> edges, v1::DType dtype = v1::DTYPE_FLOAT64) {
  v1::HistogramRequest r;
  r.mutable_header()->set_dtype(dtype);
  r.mutable_header()->mutable_edges()->Add(edges.begin(), edges.end());
  return r;
}
inline v1::HistogramRequest HistogramData(size_t bytes) {
  v1::HistogramRequest r;
  r.set_data(Bytes(bytes));
  return r;
}

// ---- SegmentedScan: the header (values, operator, kind, key_dtype or heads) and the keys
// stream, which must match the values element for element.
inline v1::SegmentedScanRequest SegHead(v1::DType dtype = v1::DTYPE_INT32, int key_dtype = v1::DTYPE_INT64,
                                 int op = v1::OPERATOR_SUM) {
  v1::SegmentedScanRequest r;
  r.mutable_header()->set_dtype(dtype);
  r.mutable_header()->set_op(static_cast<v1::Operator>(op));
  r.mutable_header()->set_key_dtype(static_cast<v1::DType>(key_dtype));
  return r;
}
inline v1::SegmentedScanRequest SegChunk(size_t data_bytes, size_t key_bytes) {
  v1::SegmentedScanRequest r;
  r.set_data(Bytes(data_bytes));
  r.set_keys(Bytes(key_bytes));
  return r;
}

// ---- ReduceByKey: its header and the keys stream (checked as SegmentedScan's).
inline v1::ReduceByKeyRequest ByKeyHead(v1::DType dtype = v1::DTYPE_INT32, int key_dtype = v1::DTYPE_INT32,
                                 int op = v1::OPERATOR_SUM) {
  v1::ReduceByKeyRequest r;
  r.mutable_header()->set_dtype(dtype);
  r.mutable_header()->set_op(static_cast<v1::Operator>(op));
  r.mutable_header()->set_key_dtype(static_cast<v1::DType>(key_dtype));
  return r;
}
inline v1::ReduceByKeyRequest ByKeyChunk(size_t data_bytes, size_t key_bytes) {
  v1::ReduceByKeyRequest r;
  r.set_data(Bytes(data_bytes));
  r.set_keys(Bytes(key_bytes));
  return r;
}

// ---- Sort: its header (output, values_dtype) and the values stream beside the keys.
inline v1::SortRequest SortHead(v1::DType dtype = v1::DTYPE_INT32, int output = v1::SORT_OUTPUT_KEYS,
                         int values_dtype = v1::DTYPE_UNSPECIFIED) {
  v1::SortRequest r;
  r.mutable_header()->set_dtype(dtype);
  r.mutable_header()->set_output(static_cast<v1::SortOutput>(output));
  r.mutable_header()->set_values_dtype(static_cast<v1::DType>(values_dtype));
  return r;
}
inline v1::SortRequest SortChunk(size_t key_bytes, size_t value_bytes) {
  v1::SortRequest r;
  r.set_keys(Bytes(key_bytes));
  r.set_values(Bytes(value_bytes));
  return r;
}

// ---- Scan2D: its header (cols, rows) and a stream that must end on a row boundary.
inline v1::Scan2DRequest Scan2DHead(v1::DType dtype = v1::DTYPE_INT32, uint64_t cols = 10, int op = v1::OPERATOR_SUM) {
  v1::Scan2DRequest r;
  r.mutable_header()->set_dtype(dtype);
  r.mutable_header()->set_op(static_cast<v1::Operator>(op));
  r.mutable_header()->set_cols(cols);
  return r;
}
inline v1::Scan2DRequest Scan2DChunk(size_t bytes) {
  v1::Scan2DRequest r;
  r.set_data(Bytes(bytes));
  return r;
}

// ---- Narrow dtypes (issue 47): Scan's and Reduce's output_dtype, and every other place a
// narrow dtype is not served.
template <class C>
C WithOutput(C r, int output) {
  r.mutable_header()->set_output_dtype(static_cast<v1::DType>(output));
  return r;
}

// The rows by family, in the order Rows() (invalid_input_test.cc) adds them.
void StreamRows(std::vector<Row>& rows);
void LaneRows(std::vector<Row>& rows);
void SharedMemoryRows(std::vector<Row>& rows);
void DeviceMemoryRows(std::vector<Row>& rows);
void DeviceMemoryHistogramSortRows(std::vector<Row>& rows);
void DeviceMemorySegmentedRows(std::vector<Row>& rows);
void HistogramRows(std::vector<Row>& rows);
void SegmentedRows(std::vector<Row>& rows);
void ReduceByKeyRows(std::vector<Row>& rows);
void SortRows(std::vector<Row>& rows);
void Scan2DRows(std::vector<Row>& rows);
void NarrowRows(std::vector<Row>& rows);
void CarryRows(std::vector<Row>& rows);  // ScanHeader.carry
void ResidentRows(std::vector<Row>& rows);
void ResidentMemoryRows(std::vector<Row>& rows);  // PutArray's and GetArray's shared_memory, device_memory
void ResidentKeyedRows(std::vector<Row>& rows);  // invalid_input_resident_keyed_rows.cc
void ResidentSelectRows(std::vector<Row>& rows);  // Compact's, Histogram's and Sort's header.resident
void PipelineRows(std::vector<Row>& rows);        // invalid_input_pipeline_rows.cc

// invalid_input_valid_calls.cc: a valid call of `rpc` on a fresh client of `server`, checked
// against the reference (each row is followed by one); the raw resident calls the rows use.
void ExpectValidCall(testing::TestServer& server, Rpc rpc);
grpc::Status PutArray(v1::GpuScan::Stub& stub, const std::string& data, v1::ArrayInfo* info);
grpc::Status DropArray(v1::GpuScan::Stub& stub, const std::string& id);
grpc::Status GetArray(v1::GpuScan::Stub& stub, const std::string& id, uint64_t offset, int64_t count,
                      std::string* data);

}  // namespace gpuscan::matrix
