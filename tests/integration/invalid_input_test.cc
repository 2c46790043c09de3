// The bad input matrix: every malformed request gets the right status code and a message naming
// the field and the value, and the server keeps serving everyone else.
//
// One table row per fault: the RPC, the raw request messages (sent on the raw stub, so any
// malformed sequence is possible), the expected code and the substrings the message must
// contain. Each row runs while a valid Scan is in flight on the same channel (started before
// the bad call, finished and checked after it), and is followed by a valid call of the row's
// RPC. AllRowsAtOnce sends every row concurrently, with valid calls running beside them.
// Engine-neutral: it runs on whichever engine GPUSCAN_TEST_ENGINE names (CTest: the cpu engine,
// and the cuda engine under label gpu).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "engine/types.h"
#include "reference.h"
#include "test_server.h"

namespace gpuscan {
namespace {

using ::testing::HasSubstr;
using testing::TestServer;

constexpr uint64_t kChunkBytes = 4096;
constexpr uint64_t kMaxRequestBytes = 64 * 1024;
constexpr auto kInvalid = grpc::StatusCode::INVALID_ARGUMENT;
constexpr auto kExhausted = grpc::StatusCode::RESOURCE_EXHAUSTED;
constexpr auto kUnimplemented = grpc::StatusCode::UNIMPLEMENTED;

// Payload bytes: never zero, so nothing passes by accident of an all-zero pattern.
std::string Bytes(size_t n) { return std::string(n, '\x03'); }

// The regions the shared-memory rows name, in a directory of their own (made once per process):
// "in64" and "out64" 64 bytes, "small" 8 bytes, "flags16" 16 bytes, a directory "dir" and a symlink "link".
const std::string& MatrixShmDir() {
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

server::ServerOptions MatrixServerOptions() {
  server::ServerOptions o;
  o.shm_dir = MatrixShmDir();
  o.chunk_bytes = kChunkBytes;
  o.max_request_bytes = kMaxRequestBytes;
  o.lane_wait = std::chrono::milliseconds(300);  // the missing-lane row waits this long
  return o;
}
const uint64_t kReceiveLimit = server::MaxReceiveMessageBytes(MatrixServerOptions());

enum class Rpc { kScan, kReduce, kCompact, kHistogram, kSegmented, kReduceByKey, kSort, kScan2D };

struct Row {
  std::string name;
  Rpc rpc = Rpc::kScan;
  // The requests of the one RPC the row drives (the other two stay empty).
  std::vector<v1::ScanRequest> scan;
  std::vector<v1::ReduceRequest> reduce;
  std::vector<v1::CompactRequest> compact;
  std::vector<v1::HistogramRequest> histogram;
  std::vector<v1::SegmentedScanRequest> segmented;
  std::vector<v1::ReduceByKeyRequest> by_key;
  std::vector<v1::SortRequest> sort;
  std::vector<v1::Scan2DRequest> scan2d;
  // Scan and Reduce rows: request messages as raw bytes (malformed encodings), sent instead.
  std::vector<std::string> raw;
  grpc::StatusCode code = kInvalid;
  std::vector<std::string> expect;  // substrings of the message: the field and the value
  // Set the header's algorithm to one this server's engine lacks (and expect its name).
  bool missing_algorithm = false;
};

// Test names and failure messages show a row by its name.
void PrintTo(const Row& row, std::ostream* os) { *os << row.name; }


// ---- request builders, one set per RPC; C = the request type
v1::ScanRequest ScanHead(v1::DType dtype = v1::DTYPE_INT32, int op = v1::OPERATOR_SUM) {
  v1::ScanRequest r;
  r.mutable_header()->set_dtype(dtype);
  r.mutable_header()->set_op(static_cast<v1::Operator>(op));
  return r;
}
v1::ReduceRequest ReduceHead(v1::DType dtype = v1::DTYPE_INT32, int op = v1::OPERATOR_SUM) {
  v1::ReduceRequest r;
  r.mutable_header()->set_dtype(dtype);
  r.mutable_header()->set_op(static_cast<v1::Operator>(op));
  return r;
}
v1::CompactRequest CompactHead(v1::DType dtype = v1::DTYPE_INT32, bool use_flags = true) {
  v1::CompactRequest r;
  r.mutable_header()->set_dtype(dtype);
  if (use_flags) {
    r.mutable_header()->set_use_flags(true);
  } else {
    r.mutable_header()->mutable_predicate()->set_op(v1::PREDICATE_OP_NONZERO);
  }
  return r;
}
v1::CompactRequest CompactPredicate(v1::DType dtype, v1::PredicateOp op) {
  v1::CompactRequest r = CompactHead(dtype, false);
  r.mutable_header()->mutable_predicate()->set_op(op);
  return r;
}

template <class C>
C Head(v1::DType dtype = v1::DTYPE_INT32);
template <>
v1::ScanRequest Head(v1::DType dtype) { return ScanHead(dtype); }
template <>
v1::ReduceRequest Head(v1::DType dtype) { return ReduceHead(dtype); }
// Compact rows that are not about flags select by predicate, so values alone are well formed.
template <>
v1::CompactRequest Head(v1::DType dtype) { return CompactHead(dtype, false); }

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
v1::CompactRequest ValuesAndFlags(size_t elements, size_t flags, size_t element_size = 4) {
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

Row MakeRow(std::string name, std::vector<v1::ScanRequest> r, grpc::StatusCode code, std::vector<std::string> expect) {
  Row row{"Scan_" + name, Rpc::kScan};
  row.scan = std::move(r);
  row.code = code;
  row.expect = std::move(expect);
  return row;
}
Row MakeRow(std::string name, std::vector<v1::ReduceRequest> r, grpc::StatusCode code, std::vector<std::string> expect) {
  Row row{"Reduce_" + name, Rpc::kReduce};
  row.reduce = std::move(r);
  row.code = code;
  row.expect = std::move(expect);
  return row;
}
Row MakeRow(std::string name, std::vector<v1::CompactRequest> r, grpc::StatusCode code, std::vector<std::string> expect) {
  Row row{"Compact_" + name, Rpc::kCompact};
  row.compact = std::move(r);
  row.code = code;
  row.expect = std::move(expect);
  return row;
}

Row MakeRow(std::string name, std::vector<v1::HistogramRequest> r, grpc::StatusCode code,
            std::vector<std::string> expect) {
  Row row{"Histogram_" + name, Rpc::kHistogram};
  row.histogram = std::move(r);
  row.code = code;
  row.expect = std::move(expect);
  return row;
}

Row MakeRow(std::string name, std::vector<v1::SegmentedScanRequest> r, grpc::StatusCode code,
            std::vector<std::string> expect) {
  Row row{"SegmentedScan_" + name, Rpc::kSegmented};
  row.segmented = std::move(r);
  row.code = code;
  row.expect = std::move(expect);
  return row;
}

Row MakeRow(std::string name, std::vector<v1::ReduceByKeyRequest> r, grpc::StatusCode code,
            std::vector<std::string> expect) {
  Row row{"ReduceByKey_" + name, Rpc::kReduceByKey};
  row.by_key = std::move(r);
  row.code = code;
  row.expect = std::move(expect);
  return row;
}

Row MakeRow(std::string name, std::vector<v1::SortRequest> r, grpc::StatusCode code, std::vector<std::string> expect) {
  Row row{"Sort_" + name, Rpc::kSort};
  row.sort = std::move(r);
  row.code = code;
  row.expect = std::move(expect);
  return row;
}

Row MakeRow(std::string name, std::vector<v1::Scan2DRequest> r, grpc::StatusCode code, std::vector<std::string> expect) {
  Row row{"Scan2D_" + name, Rpc::kScan2D};
  row.scan2d = std::move(r);
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

void SharedMemoryRows(std::vector<Row>& rows) {
  using V = std::vector<v1::ScanRequest>;
  using R = std::vector<v1::ReduceRequest>;
  using K = std::vector<v1::CompactRequest>;
  constexpr auto kNotFound = grpc::StatusCode::NOT_FOUND;
  ForEveryRpc(rows, "ShmRegionIsAPath", kInvalid, {"header.shared_memory.region \"../in64\"", "plain file name"},
              [](auto t) { return std::vector{WithShm(Head<typename decltype(t)::type>(), "../in64")}; });
  ForEveryRpc(rows, "ShmRegionEmptyName", kInvalid, {"header.shared_memory.region \"\"", "plain file name"},
              [](auto t) { return std::vector{WithShm(Head<typename decltype(t)::type>(), "")}; });
  ForEveryRpc(rows, "ShmRegionMissing", kNotFound, {"header.shared_memory.region \"nope\"", "no such region"},
              [](auto t) { return std::vector{WithShm(Head<typename decltype(t)::type>(), "nope")}; });
  ForEveryRpc(rows, "ShmRegionTooSmall", grpc::StatusCode::OUT_OF_RANGE,
              {"header.shared_memory.region \"small\"", "region has 8 bytes", "bytes 64"},
              [](auto t) { return std::vector{WithShm(Head<typename decltype(t)::type>(), "small")}; });
  ForEveryRpc(rows, "ShmBytesNotWholeElements", kInvalid, {"\"in64\"", "bytes 6", "element size 4"},
              [](auto t) { return std::vector{WithShm(Head<typename decltype(t)::type>(), "in64", 6)}; });
  ForEveryRpc(rows, "ShmRegionIsASymlink", kInvalid, {"\"link\"", "symbolic link"},
              [](auto t) { return std::vector{WithShm(Head<typename decltype(t)::type>(), "link")}; });
  ForEveryRpc(rows, "ShmRegionIsADirectory", kInvalid, {"\"dir\"", "not a regular file"},
              [](auto t) { return std::vector{WithShm(Head<typename decltype(t)::type>(), "dir")}; });
  ForEveryRpc(rows, "ShmAboveMaxRequestBytes", kExhausted,
              {"header.shared_memory.bytes 1048576", "--max-request-bytes"},
              [](auto t) { return std::vector{WithShm(Head<typename decltype(t)::type>(), "in64", 1 << 20)}; });
  ForEveryRpc(rows, "ShmWithInlineData", kInvalid, {"$F: request 1 carries 64 bytes", "header.shared_memory"},
              [](auto t) {
                using C = typename decltype(t)::type;
                return std::vector{WithShm(Head<C>(), "in64"), Data<C>(64)};
              });
  ForEveryRpc(rows, "ShmWithLanes", kInvalid, {"header.shared_memory: cannot be combined with header.lanes"},
              [](auto t) { return std::vector{WithLanes(WithShm(Head<typename decltype(t)::type>(), "in64"), 0, 2, 16)}; });
  // SharedMemory.arena changes when a region is registered, never what is checked.
  auto arena = [](auto r) {
    r.mutable_header()->mutable_shared_memory()->set_arena(true);
    return r;
  };
  ForEveryRpc(rows, "ShmArenaRegionIsAPath", kInvalid, {"header.shared_memory.region \"../in64\"", "plain file name"},
              [&](auto t) { return std::vector{arena(WithShm(Head<typename decltype(t)::type>(), "../in64"))}; });
  ForEveryRpc(rows, "ShmArenaRegionMissing", kNotFound, {"header.shared_memory.region \"nope\"", "no such region"},
              [&](auto t) { return std::vector{arena(WithShm(Head<typename decltype(t)::type>(), "nope"))}; });
  ForEveryRpc(rows, "ShmArenaRegionTooSmall", grpc::StatusCode::OUT_OF_RANGE,
              {"header.shared_memory.region \"small\"", "region has 8 bytes", "bytes 64"},
              [&](auto t) { return std::vector{arena(WithShm(Head<typename decltype(t)::type>(), "small"))}; });
  ForEveryRpc(rows, "ShmCountDiffers", kInvalid,
              {"header.element_count 5", "header.shared_memory.bytes 64", "16 elements"},
              [](auto t) { return std::vector{WithCount(WithShm(Head<typename decltype(t)::type>(), "in64"), 5)}; });
  {
    auto scan = WithShm(ScanHead(), "in64", 32);
    scan.mutable_header()->mutable_shared_memory()->set_output_region("in64");
    scan.mutable_header()->mutable_shared_memory()->set_output_offset(4);
    rows.push_back(MakeRow("ShmOutputOverlapsInput", V{scan}, kInvalid,
                           {"header.shared_memory.output_region \"in64\" overlaps header.shared_memory.region"}));
    scan = WithShm(ScanHead(), "in64");
    scan.mutable_header()->mutable_shared_memory()->set_output_offset(8);
    rows.push_back(MakeRow("ShmOutputOffsetWithoutRegion", V{scan}, kInvalid,
                           {"header.shared_memory.output_offset 8", "without header.shared_memory.output_region"}));
    scan = WithShm(ScanHead(), "in64");
    scan.mutable_header()->mutable_shared_memory()->set_indices_region("flags16");
    rows.push_back(MakeRow("ShmIndicesOnScan", V{scan}, kInvalid,
                           {"header.shared_memory.indices_region \"flags16\"", "only a Compact"}));
    auto reduce = WithShm(ReduceHead(), "in64");
    reduce.mutable_header()->mutable_shared_memory()->set_output_region("flags16");
    rows.push_back(MakeRow("ShmOutputOnReduce", R{reduce}, kInvalid,
                           {"header.shared_memory.output_region \"flags16\"", "Reduce writes no output"}));
    reduce = WithShm(ReduceHead(), "in64");
    reduce.mutable_header()->mutable_shared_memory()->set_flags_region("flags16");
    rows.push_back(MakeRow("ShmFlagsOnReduce", R{reduce}, kInvalid,
                           {"header.shared_memory.flags_region \"flags16\"", "only a Compact with use_flags"}));
    auto compact = WithShm(CompactHead(v1::DTYPE_INT32, false), "in64");
    compact.mutable_header()->mutable_shared_memory()->clear_output_region();
    rows.push_back(MakeRow("ShmNoValuesOutput", K{compact}, kInvalid,
                           {"header.shared_memory.output_region: required for the kept values"}));
    compact = WithShm(CompactHead(v1::DTYPE_INT32, true), "in64");
    rows.push_back(MakeRow("ShmFlagsRegionMissing", K{compact}, kInvalid,
                           {"header.shared_memory.flags_region: required with use_flags"}));
    compact = CompactHead(v1::DTYPE_INT32, false);
    compact.mutable_header()->set_output(v1::COMPACT_OUTPUT_VALUES_AND_INDICES);
    compact = WithShm(compact, "in64");
    rows.push_back(MakeRow("ShmIndicesRegionMissing", K{compact}, kInvalid,
                           {"header.shared_memory.indices_region: required for the kept indices"}));
    compact = CompactHead(v1::DTYPE_INT32, false);
    compact.mutable_header()->set_output(v1::COMPACT_OUTPUT_INDICES);
    compact = WithShm(compact, "in64");
    compact.mutable_header()->mutable_shared_memory()->set_indices_region("flags16");
    compact.mutable_header()->mutable_shared_memory()->set_output_region("small");
    rows.push_back(MakeRow("ShmValuesRegionWhenIndicesOnly", K{compact}, kInvalid,
                           {"header.shared_memory.output_region \"small\"", "asks for indices only"}));
    compact = CompactHead(v1::DTYPE_INT32, false);
    compact.mutable_header()->set_output(v1::COMPACT_OUTPUT_INDICES);
    compact = WithShm(compact, "in64", 32);  // 8 elements: 64 bytes of indices fit the region
    compact.mutable_header()->mutable_shared_memory()->set_indices_region("in64");
    rows.push_back(MakeRow("ShmIndicesOverlapInput", K{compact}, kInvalid,
                           {"header.shared_memory.indices_region \"in64\" overlaps"}));
  }
}

// ---- device memory (header.device_memory): this matrix's server has no --allow-device-ipc, so
// every well-formed header gets FAILED_PRECONDITION; what the header alone shows comes first.
// The calls on real handles (CUDA IPC) are in python/tests/test_device_ipc.py and the unit
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

void DeviceMemoryRows(std::vector<Row>& rows) {
  using V = std::vector<v1::ScanRequest>;
  using R = std::vector<v1::ReduceRequest>;
  using K = std::vector<v1::CompactRequest>;
  auto device = [](auto* r) { return r->mutable_header()->mutable_device_memory(); };
  ForEveryRpc(rows, "DeviceMemoryOff", grpc::StatusCode::FAILED_PRECONDITION,
              {"header.device_memory", "--allow-device-ipc"},
              [](auto t) { return std::vector{WithDevice(Head<typename decltype(t)::type>())}; });
  ForEveryRpc(rows, "DeviceWithSharedMemory", kInvalid,
              {"header.device_memory: cannot be combined with header.shared_memory"},
              [](auto t) { return std::vector{WithShm(WithDevice(Head<typename decltype(t)::type>()), "in64")}; });
  ForEveryRpc(rows, "DeviceWithLanes", kInvalid, {"header.device_memory: cannot be combined with header.lanes"},
              [](auto t) { return std::vector{WithLanes(WithDevice(Head<typename decltype(t)::type>()), 0, 2, 16)}; });
  ForEveryRpc(rows, "DeviceUuidWrongSize", kInvalid, {"header.device_memory.device_uuid has 15 bytes", "16"},
              [&](auto t) {
                auto r = WithDevice(Head<typename decltype(t)::type>());
                device(&r)->set_device_uuid(std::string(15, '\x5a'));
                return std::vector{r};
              });
  ForEveryRpc(rows, "DeviceHandleWrongSize", kInvalid, {"header.device_memory.handle has 63 bytes", "64"},
              [&](auto t) {
                auto r = WithDevice(Head<typename decltype(t)::type>());
                device(&r)->set_handle(std::string(63, '\x11'));
                return std::vector{r};
              });
  ForEveryRpc(rows, "DeviceHandleMissing", kInvalid, {"header.device_memory.handle has 0 bytes"}, [&](auto t) {
    auto r = WithDevice(Head<typename decltype(t)::type>());
    device(&r)->clear_handle();
    return std::vector{r};
  });
  ForEveryRpc(rows, "DeviceBytesNotWholeElements", kInvalid, {"header.device_memory.bytes 6", "element size 4"},
              [](auto t) { return std::vector{WithDevice(Head<typename decltype(t)::type>(), 6)}; });
  ForEveryRpc(rows, "DeviceOffsetMisaligned", kInvalid, {"header.device_memory.offset 2", "element size 4"},
              [&](auto t) {
                auto r = WithDevice(Head<typename decltype(t)::type>());
                device(&r)->set_offset(2);
                return std::vector{r};
              });
  ForEveryRpc(rows, "DeviceCountDiffers", kInvalid,
              {"header.element_count 5", "header.device_memory.bytes 64", "16 elements"},
              [](auto t) { return std::vector{WithCount(WithDevice(Head<typename decltype(t)::type>()), 5)}; });
  {
    auto scan = WithDevice(ScanHead());
    device(&scan)->set_output_offset(8);
    rows.push_back(MakeRow("DeviceOutputOffsetWithoutHandle", V{scan}, kInvalid,
                           {"header.device_memory.output_offset 8", "without header.device_memory.output_handle"}));
    scan = WithDevice(ScanHead());
    device(&scan)->set_indices_handle(std::string(64, '\x33'));
    rows.push_back(MakeRow("DeviceIndicesOnScan", V{scan}, kInvalid,
                           {"header.device_memory.indices_handle (64 bytes)", "only a Compact"}));
    auto reduce = WithDevice(ReduceHead());
    device(&reduce)->set_output_handle(std::string(64, '\x22'));
    rows.push_back(MakeRow("DeviceOutputOnReduce", R{reduce}, kInvalid,
                           {"header.device_memory.output_handle (64 bytes)", "Reduce writes no output"}));
    auto compact = WithDevice(CompactHead(v1::DTYPE_INT32, false));
    device(&compact)->clear_output_handle();
    rows.push_back(MakeRow("DeviceNoValuesOutput", K{compact}, kInvalid,
                           {"header.device_memory.output_handle: required for the kept values"}));
    compact = WithDevice(CompactHead(v1::DTYPE_INT32, true));
    rows.push_back(MakeRow("DeviceFlagsHandleMissing", K{compact}, kInvalid,
                           {"header.device_memory.flags_handle: required with use_flags"}));
    compact = WithDevice(CompactHead(v1::DTYPE_INT32, false));
    device(&compact)->set_output_handle(std::string(10, '\x22'));
    rows.push_back(MakeRow("DeviceOutputHandleWrongSize", K{compact}, kInvalid,
                           {"header.device_memory.output_handle has 10 bytes"}));
    compact = CompactHead(v1::DTYPE_INT32, false);
    compact.mutable_header()->set_output(v1::COMPACT_OUTPUT_VALUES_AND_INDICES);
    compact = WithDevice(compact);
    device(&compact)->set_indices_handle(std::string(64, '\x33'));
    device(&compact)->set_indices_offset(4);
    rows.push_back(MakeRow("DeviceIndicesOffsetMisaligned", K{compact}, kInvalid,
                           {"header.device_memory.indices_offset 4", "element size 8"}));
  }
}

// ---- Histogram: the bins (header.bins, lo, hi or header.edges) and the stream checks every
// call has
v1::HistogramRequest HistogramHead(v1::DType dtype = v1::DTYPE_FLOAT32, uint32_t bins = 16, double lo = 0,
                                   double hi = 1) {
  v1::HistogramRequest r;
  r.mutable_header()->set_dtype(dtype);
  r.mutable_header()->set_bins(bins);
  r.mutable_header()->set_lo(lo);
  r.mutable_header()->set_hi(hi);
  return r;
}
v1::HistogramRequest HistogramEdges(std::vector<double> edges, v1::DType dtype = v1::DTYPE_FLOAT64) {
  v1::HistogramRequest r;
  r.mutable_header()->set_dtype(dtype);
  r.mutable_header()->mutable_edges()->Add(edges.begin(), edges.end());
  return r;
}
v1::HistogramRequest HistogramData(size_t bytes) {
  v1::HistogramRequest r;
  r.set_data(Bytes(bytes));
  return r;
}

void HistogramRows(std::vector<Row>& rows) {
  using H = std::vector<v1::HistogramRequest>;
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  rows.push_back(MakeRow("NeitherBinsNorEdges", H{HistogramHead(v1::DTYPE_FLOAT32, 0)}, kInvalid,
                         {"neither bins nor edges"}));
  {
    H h{HistogramHead()};
    h[0].mutable_header()->add_edges(0.5);
    h[0].mutable_header()->add_edges(1.5);
    rows.push_back(MakeRow("BothBinsAndEdges", h, kInvalid, {"both bins=16 and 2 edges"}));
  }
  rows.push_back(MakeRow("BinsAboveLimit", H{HistogramHead(v1::DTYPE_INT32, 65537)}, kInvalid,
                         {"header.bins: 65537 bins", "limit of 65536", "max_histogram_bins"}));
  // More edges than max_histogram_bins + 1 are refused naming header.edges (histogram_header_test.cc);
  // here the header alone is beyond this server's receive limit, which gRPC enforces first.
  rows.push_back(MakeRow("EdgesAboveReceiveLimit", H{HistogramEdges(std::vector<double>(65538, 1.0))}, kExhausted,
                         {"Received message larger than max"}));
  rows.push_back(MakeRow("LoNaN", H{HistogramHead(v1::DTYPE_FLOAT64, 4, nan, 1)}, kInvalid, {"header.lo=nan", "not finite"}));
  rows.push_back(MakeRow("HiInfinite", H{HistogramHead(v1::DTYPE_FLOAT64, 4, 0, inf)}, kInvalid, {"header.hi=inf", "not finite"}));
  rows.push_back(MakeRow("LoNotBelowHi", H{HistogramHead(v1::DTYPE_INT64, 4, 3, 3)}, kInvalid,
                         {"header.lo=3 must be below header.hi=3"}));
  rows.push_back(MakeRow("LoAboveHi", H{HistogramHead(v1::DTYPE_UINT32, 4, 2.5, -1)}, kInvalid,
                         {"header.lo=2.5 must be below header.hi=-1"}));
  // 17 subnormal ulps over 33 bins: the rounded step makes the last edge fall below the one before.
  rows.push_back(MakeRow("RangeTooNarrowForBins", H{HistogramHead(v1::DTYPE_UINT32, 33, 0, 17 * 4.9406564584124654e-324)},
                         kInvalid, {"header.bins=33", "edges that decrease", "too narrow"}));
  rows.push_back(MakeRow("RangeOverflows", H{HistogramHead(v1::DTYPE_FLOAT64, 4, -1e308, 1e308)}, kInvalid,
                         {"header.hi - header.lo", "overflows float64"}));
  rows.push_back(MakeRow("OneEdge", H{HistogramEdges({1.0})}, kInvalid, {"header.edges has 1 edge"}));
  rows.push_back(MakeRow("NaNEdge", H{HistogramEdges({0, nan, 2})}, kInvalid, {"header.edges[1] is NaN"}));
  rows.push_back(MakeRow("DecreasingEdge", H{HistogramEdges({0, 2, 1.5, 3})}, kInvalid,
                         {"header.edges[2]=1.5 is below header.edges[1]=2"}));
  rows.push_back(MakeRow("UnspecifiedDType", H{HistogramHead(v1::DTYPE_UNSPECIFIED)}, kInvalid,
                         {"header.dtype", "DTYPE_UNSPECIFIED"}));
  rows.push_back(MakeRow("HeaderMissing", H{HistogramData(16)}, kInvalid, {"header missing", "request #0"}));
  rows.push_back(MakeRow("ChunkNotWholeElements", H{HistogramHead(v1::DTYPE_FLOAT64), HistogramData(1023)}, kInvalid,
                         {"request #1: data length 1023 bytes", "not a multiple of the float64 element size 8"}));
  {
    H h{HistogramHead(), HistogramData(50 * 4)};
    h[0].mutable_header()->set_element_count(100);
    rows.push_back(MakeRow("DeclaredCountLarger", h, kInvalid, {"header.element_count=100", "stream carried 50 elements"}));
  }
  rows.push_back(MakeRow("ChunkAboveLimit", H{HistogramHead(), HistogramData(2 * kChunkBytes)}, kExhausted,
                         {"request #1: data length 8192 bytes", "chunk limit of 4096 bytes"}));
}

// ---- SegmentedScan: the header (values, operator, kind, key_dtype or heads) and the keys
// stream, which must match the values element for element.
v1::SegmentedScanRequest SegHead(v1::DType dtype = v1::DTYPE_INT32, int key_dtype = v1::DTYPE_INT64,
                                 int op = v1::OPERATOR_SUM) {
  v1::SegmentedScanRequest r;
  r.mutable_header()->set_dtype(dtype);
  r.mutable_header()->set_op(static_cast<v1::Operator>(op));
  r.mutable_header()->set_key_dtype(static_cast<v1::DType>(key_dtype));
  return r;
}
v1::SegmentedScanRequest SegChunk(size_t data_bytes, size_t key_bytes) {
  v1::SegmentedScanRequest r;
  r.set_data(Bytes(data_bytes));
  r.set_keys(Bytes(key_bytes));
  return r;
}

void SegmentedRows(std::vector<Row>& rows) {
  using S = std::vector<v1::SegmentedScanRequest>;
  rows.push_back(MakeRow("UnspecifiedDType", S{SegHead(v1::DTYPE_UNSPECIFIED)}, kInvalid,
                         {"header.dtype", "DTYPE_UNSPECIFIED"}));
  rows.push_back(MakeRow("UnknownOperator", S{SegHead(v1::DTYPE_INT32, v1::DTYPE_INT64, 99)}, kInvalid,
                         {"header.op=99"}));
  rows.push_back(MakeRow("BitwiseOnFloat", S{SegHead(v1::DTYPE_FLOAT64, v1::DTYPE_INT64, v1::OPERATOR_BIT_OR)},
                         kInvalid, {"header.op=OPERATOR_BIT_OR", "dtype float64"}));
  {
    S s{SegHead()};
    s[0].mutable_header()->set_kind(static_cast<v1::ScanKind>(7));
    rows.push_back(MakeRow("UnknownKind", s, kInvalid, {"header.kind=7"}));
  }
  {
    S s{SegHead()};
    s[0].mutable_header()->clear_segments();
    rows.push_back(MakeRow("NeitherKeysNorHeads", s, kInvalid, {"neither key_dtype nor heads"}));
  }
  {
    S s{SegHead()};
    s[0].mutable_header()->set_heads(false);
    rows.push_back(MakeRow("HeadsFalse", s, kInvalid, {"header.heads=false"}));
  }
  rows.push_back(MakeRow("FloatKeys", S{SegHead(v1::DTYPE_INT32, v1::DTYPE_FLOAT32)}, kInvalid,
                         {"header.key_dtype=DTYPE_FLOAT32", "INT32, INT64, UINT32 or UINT64"}));
  rows.push_back(MakeRow("UnknownKeyDType", S{SegHead(v1::DTYPE_INT32, 42)}, kInvalid, {"header.key_dtype=42"}));
  rows.push_back(MakeRow("UnspecifiedKeyDType", S{SegHead(v1::DTYPE_INT32, v1::DTYPE_UNSPECIFIED)}, kInvalid,
                         {"header.key_dtype=0"}));
  rows.push_back(MakeRow("HeaderMissing", S{SegChunk(16, 32)}, kInvalid, {"header missing", "request #0"}));
  rows.push_back(MakeRow("DataNotWholeElements", S{SegHead(), SegChunk(1023, 2048)}, kInvalid,
                         {"request #1: data length 1023 bytes", "int32 element size 4"}));
  rows.push_back(MakeRow("KeysNotWholeKeys", S{SegHead(), SegChunk(1024, 2047)}, kInvalid,
                         {"request #1: keys length 2047 bytes", "key_dtype int64 size 8"}));
  rows.push_back(MakeRow("KeysAboveChunkLimit", S{SegHead(), SegChunk(1024, 2 * kChunkBytes)}, kExhausted,
                         {"request #1: keys length 8192 bytes", "chunk limit of 4096 bytes"}));
  rows.push_back(MakeRow("FewerKeysThanValues", S{SegHead(), SegChunk(1024, 1024)}, kInvalid,
                         {"keys length 128 differs from data length 256", "one key per value"}));
  {
    S s{SegHead(v1::DTYPE_FLOAT32)};
    s[0].mutable_header()->set_heads(true);
    s.push_back(SegChunk(400, 101));
    rows.push_back(MakeRow("MoreHeadsThanValues", s, kInvalid,
                           {"keys length 101 differs from data length 100", "one head byte per value"}));
  }
  {
    // Values far ahead of their keys: more than 4 chunks out of step.
    S s{SegHead()};
    for (int i = 0; i < 6; ++i) s.push_back(SegChunk(kChunkBytes, 0));
    rows.push_back(MakeRow("KeysOutOfStep", s, kInvalid, {"keys (0 so far)", "out of step"}));
  }
  {
    S s{SegHead(), SegChunk(400, 800)};
    s[0].mutable_header()->set_element_count(101);
    rows.push_back(MakeRow("DeclaredCountLarger", s, kInvalid, {"header.element_count=101", "stream carried 100"}));
  }
}

// ---- ReduceByKey: its header and the keys stream (checked as SegmentedScan's).
v1::ReduceByKeyRequest ByKeyHead(v1::DType dtype = v1::DTYPE_INT32, int key_dtype = v1::DTYPE_INT32,
                                 int op = v1::OPERATOR_SUM) {
  v1::ReduceByKeyRequest r;
  r.mutable_header()->set_dtype(dtype);
  r.mutable_header()->set_op(static_cast<v1::Operator>(op));
  r.mutable_header()->set_key_dtype(static_cast<v1::DType>(key_dtype));
  return r;
}
v1::ReduceByKeyRequest ByKeyChunk(size_t data_bytes, size_t key_bytes) {
  v1::ReduceByKeyRequest r;
  r.set_data(Bytes(data_bytes));
  r.set_keys(Bytes(key_bytes));
  return r;
}

void ReduceByKeyRows(std::vector<Row>& rows) {
  using B = std::vector<v1::ReduceByKeyRequest>;
  rows.push_back(MakeRow("UnspecifiedDType", B{ByKeyHead(v1::DTYPE_UNSPECIFIED)}, kInvalid,
                         {"header.dtype", "DTYPE_UNSPECIFIED"}));
  rows.push_back(MakeRow("UnspecifiedOperator", B{ByKeyHead(v1::DTYPE_INT32, v1::DTYPE_INT32, 0)}, kInvalid,
                         {"header.op", "OPERATOR_UNSPECIFIED"}));
  rows.push_back(MakeRow("BitwiseOnFloat", B{ByKeyHead(v1::DTYPE_FLOAT32, v1::DTYPE_INT32, v1::OPERATOR_BIT_AND)},
                         kInvalid, {"header.op=OPERATOR_BIT_AND", "dtype float32"}));
  rows.push_back(MakeRow("KeyDTypeMissing", B{ByKeyHead(v1::DTYPE_INT32, v1::DTYPE_UNSPECIFIED)}, kInvalid,
                         {"header.key_dtype=0", "not a known DType"}));
  rows.push_back(MakeRow("FloatKeys", B{ByKeyHead(v1::DTYPE_INT32, v1::DTYPE_FLOAT64)}, kInvalid,
                         {"header.key_dtype=DTYPE_FLOAT64", "INT32, INT64, UINT32 or UINT64"}));
  rows.push_back(MakeRow("HeaderMissing", B{ByKeyChunk(16, 16)}, kInvalid, {"header missing", "request #0"}));
  rows.push_back(MakeRow("KeysNotWholeKeys", B{ByKeyHead(), ByKeyChunk(400, 399)}, kInvalid,
                         {"request #1: keys length 399 bytes", "key_dtype int32 size 4"}));
  rows.push_back(MakeRow("MoreKeysThanValues", B{ByKeyHead(), ByKeyChunk(400, 404)}, kInvalid,
                         {"keys length 101 differs from data length 100", "one key per value"}));
  rows.push_back(MakeRow("DataAboveChunkLimit", B{ByKeyHead(), ByKeyChunk(2 * kChunkBytes, 2 * kChunkBytes)},
                         kExhausted, {"request #1: data length 8192 bytes", "chunk limit of 4096 bytes"}));
}

// ---- Sort: its header (output, values_dtype) and the values stream beside the keys.
v1::SortRequest SortHead(v1::DType dtype = v1::DTYPE_INT32, int output = v1::SORT_OUTPUT_KEYS,
                         int values_dtype = v1::DTYPE_UNSPECIFIED) {
  v1::SortRequest r;
  r.mutable_header()->set_dtype(dtype);
  r.mutable_header()->set_output(static_cast<v1::SortOutput>(output));
  r.mutable_header()->set_values_dtype(static_cast<v1::DType>(values_dtype));
  return r;
}
v1::SortRequest SortChunk(size_t key_bytes, size_t value_bytes) {
  v1::SortRequest r;
  r.set_keys(Bytes(key_bytes));
  r.set_values(Bytes(value_bytes));
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

void DeviceMemoryHistogramSortRows(std::vector<Row>& rows) {
  using H = std::vector<v1::HistogramRequest>;
  using S = std::vector<v1::SortRequest>;
  const std::string h64(64, '\x22');
  rows.push_back(MakeRow("HistogramDeviceMemoryOff", H{WithDeviceInput(HistogramHead())},
                         grpc::StatusCode::FAILED_PRECONDITION, {"header.device_memory", "--allow-device-ipc"}));
  {
    auto h = WithDeviceInput(HistogramHead());
    h.mutable_header()->mutable_device_memory()->set_output_handle(h64);
    rows.push_back(MakeRow("HistogramDeviceOutput", H{h}, kInvalid,
                           {"header.device_memory.output_handle (64 bytes)", "Histogram writes no output"}));
    h = WithDeviceInput(HistogramHead());
    h.mutable_header()->mutable_device_memory()->set_values_handle(h64);
    rows.push_back(MakeRow("HistogramDeviceValues", H{h}, kInvalid,
                           {"header.device_memory.values_handle (64 bytes)", "only a Sort with values"}));
    h = WithDeviceInput(HistogramHead(), 6);
    rows.push_back(MakeRow("HistogramDeviceBytesNotWholeElements", H{h}, kInvalid,
                           {"header.device_memory.bytes 6", "element size 4"}));
    rows.push_back(MakeRow("HistogramDeviceWithData", H{WithDeviceInput(HistogramHead()), HistogramData(64)},
                           grpc::StatusCode::FAILED_PRECONDITION, {"header.device_memory", "--allow-device-ipc"}));
  }
  auto sort = [&](int output, int values_dtype = 0) {
    auto r = WithDeviceInput(SortHead(v1::DTYPE_INT32, output, values_dtype));
    v1::DeviceMemory* m = r.mutable_header()->mutable_device_memory();
    if (output != v1::SORT_OUTPUT_INDICES) m->set_output_handle(h64);
    if (output == v1::SORT_OUTPUT_INDICES || output == v1::SORT_OUTPUT_KEYS_AND_INDICES) m->set_indices_handle(h64);
    if (output == v1::SORT_OUTPUT_KEYS_AND_VALUES) {
      m->set_values_handle(h64);
      m->set_values_output_handle(h64);
    }
    return r;
  };
  for (int output : {v1::SORT_OUTPUT_KEYS, v1::SORT_OUTPUT_INDICES, v1::SORT_OUTPUT_KEYS_AND_INDICES}) {
    rows.push_back(MakeRow("SortDeviceMemoryOff" + std::to_string(output), S{sort(output)},
                           grpc::StatusCode::FAILED_PRECONDITION, {"header.device_memory", "--allow-device-ipc"}));
  }
  rows.push_back(MakeRow("SortDeviceMemoryOffWithValues", S{sort(v1::SORT_OUTPUT_KEYS_AND_VALUES, v1::DTYPE_INT64)},
                         grpc::StatusCode::FAILED_PRECONDITION, {"--allow-device-ipc"}));
  {
    auto r = sort(v1::SORT_OUTPUT_KEYS);
    r.mutable_header()->mutable_device_memory()->clear_output_handle();
    rows.push_back(MakeRow("SortDeviceNoKeysOutput", S{r}, kInvalid,
                           {"header.device_memory.output_handle: required for the sorted keys"}));
    r = sort(v1::SORT_OUTPUT_INDICES);
    r.mutable_header()->mutable_device_memory()->set_output_handle(h64);
    rows.push_back(MakeRow("SortDeviceKeysOutputForIndicesOnly", S{r}, kInvalid,
                           {"header.device_memory.output_handle (64 bytes)", "does not use it"}));
    r = sort(v1::SORT_OUTPUT_KEYS_AND_INDICES);
    r.mutable_header()->mutable_device_memory()->clear_indices_handle();
    rows.push_back(MakeRow("SortDeviceNoIndicesOutput", S{r}, kInvalid,
                           {"header.device_memory.indices_handle: required for the permutation"}));
    r = sort(v1::SORT_OUTPUT_KEYS_AND_VALUES, v1::DTYPE_INT64);
    r.mutable_header()->mutable_device_memory()->clear_values_handle();
    rows.push_back(MakeRow("SortDeviceNoValues", S{r}, kInvalid,
                           {"header.device_memory.values_handle: required for the values"}));
    r = sort(v1::SORT_OUTPUT_KEYS_AND_VALUES, v1::DTYPE_INT64);
    r.mutable_header()->mutable_device_memory()->set_values_output_offset(4);
    rows.push_back(MakeRow("SortDeviceValuesOutputMisaligned", S{r}, kInvalid,
                           {"header.device_memory.values_output_offset 4", "element size 8"}));
    r = sort(v1::SORT_OUTPUT_KEYS);
    r.mutable_header()->mutable_device_memory()->set_values_handle(h64);
    rows.push_back(MakeRow("SortDeviceValuesWithoutValuesOutput", S{r}, kInvalid,
                           {"header.device_memory.values_handle (64 bytes)", "does not use it"}));
    r = sort(v1::SORT_OUTPUT_KEYS);
    r.mutable_header()->mutable_device_memory()->set_flags_handle(h64);
    rows.push_back(MakeRow("SortDeviceFlags", S{r}, kInvalid,
                           {"header.device_memory.flags_handle (64 bytes)", "does not use it"}));
    r = sort(v1::SORT_OUTPUT_KEYS);
    r.mutable_header()->mutable_device_memory()->set_handle(std::string(3, 'x'));
    rows.push_back(MakeRow("SortDeviceHandleWrongSize", S{r}, kInvalid,
                           {"header.device_memory.handle has 3 bytes"}));
    r = WithCount(sort(v1::SORT_OUTPUT_KEYS), 5);
    rows.push_back(MakeRow("SortDeviceCountDiffers", S{r}, kInvalid,
                           {"header.element_count 5", "header.device_memory.bytes 64", "16 elements"}));
    rows.push_back(MakeRow("SortDeviceWithKeys", S{sort(v1::SORT_OUTPUT_KEYS), SortChunk(64, 0)},
                           grpc::StatusCode::FAILED_PRECONDITION, {"--allow-device-ipc"}));
  }
}

// ---- device memory on SegmentedScan (no --allow-device-ipc here)
void DeviceMemorySegmentedRows(std::vector<Row>& rows) {
  using S = std::vector<v1::SegmentedScanRequest>;
  const std::string h64(64, '\x22');
  auto seg = [&](bool keys = true) {
    auto r = WithDeviceInput(SegHead());
    if (keys) r.mutable_header()->mutable_device_memory()->set_keys_handle(h64);
    return r;
  };
  rows.push_back(MakeRow("SegmentedDeviceMemoryOff", S{seg()}, grpc::StatusCode::FAILED_PRECONDITION,
                         {"header.device_memory", "--allow-device-ipc"}));
  rows.push_back(MakeRow("SegmentedDeviceNoKeys", S{seg(false)}, kInvalid,
                         {"header.device_memory.keys_handle: required for the segment keys"}));
  auto r = seg();
  r.mutable_header()->mutable_device_memory()->set_keys_offset(4);  // int64 keys
  rows.push_back(MakeRow("SegmentedDeviceKeysMisaligned", S{r}, kInvalid,
                         {"header.device_memory.keys_offset 4", "element size 8"}));
  r = seg();
  r.mutable_header()->mutable_device_memory()->set_keys_handle(std::string(5, 'k'));
  rows.push_back(MakeRow("SegmentedDeviceKeysHandleWrongSize", S{r}, kInvalid,
                         {"header.device_memory.keys_handle has 5 bytes"}));
  r = seg();
  r.mutable_header()->mutable_device_memory()->set_indices_handle(h64);
  rows.push_back(MakeRow("SegmentedDeviceIndices", S{r}, kInvalid,
                         {"header.device_memory.indices_handle (64 bytes)", "only a Compact"}));
  rows.push_back(MakeRow("SegmentedDeviceWithData", S{seg(), SegChunk(64, 128)}, grpc::StatusCode::FAILED_PRECONDITION,
                         {"--allow-device-ipc"}));
  // keys_handle on the other RPCs
  auto scan = WithDevice(ScanHead());
  scan.mutable_header()->mutable_device_memory()->set_keys_handle(h64);
  rows.push_back(MakeRow("DeviceKeysOnScan", std::vector<v1::ScanRequest>{scan}, kInvalid,
                         {"header.device_memory.keys_handle (64 bytes)", "only a SegmentedScan reads keys"}));
  auto sort = WithDeviceInput(SortHead());
  sort.mutable_header()->mutable_device_memory()->set_output_handle(h64);
  sort.mutable_header()->mutable_device_memory()->set_keys_handle(h64);
  rows.push_back(MakeRow("DeviceKeysOnSort", std::vector<v1::SortRequest>{sort}, kInvalid,
                         {"header.device_memory.keys_handle (64 bytes)", "does not use it"}));
}

void SortRows(std::vector<Row>& rows) {
  using S = std::vector<v1::SortRequest>;
  rows.push_back(MakeRow("UnspecifiedDType", S{SortHead(v1::DTYPE_UNSPECIFIED)}, kInvalid,
                         {"header.dtype", "DTYPE_UNSPECIFIED"}));
  rows.push_back(MakeRow("UnknownOutput", S{SortHead(v1::DTYPE_INT32, 9)}, kInvalid,
                         {"header.output=9", "not a known SortOutput"}));
  rows.push_back(MakeRow("ValuesDTypeWithoutValues", S{SortHead(v1::DTYPE_INT32, v1::SORT_OUTPUT_INDICES, v1::DTYPE_INT32)},
                         kInvalid, {"header.values_dtype=1", "SORT_OUTPUT_INDICES has no values"}));
  rows.push_back(MakeRow("ValuesDTypeMissing", S{SortHead(v1::DTYPE_INT32, v1::SORT_OUTPUT_KEYS_AND_VALUES)}, kInvalid,
                         {"header.values_dtype is DTYPE_UNSPECIFIED"}));
  rows.push_back(MakeRow("UnknownValuesDType", S{SortHead(v1::DTYPE_INT32, v1::SORT_OUTPUT_KEYS_AND_VALUES, 42)},
                         kInvalid, {"header.values_dtype=42", "not a known DType"}));
  rows.push_back(MakeRow("ValuesWithoutValuesOutput", S{SortHead(), SortChunk(400, 400)}, kInvalid,
                         {"request #1: values sent (400 bytes)", "not SORT_OUTPUT_KEYS_AND_VALUES"}));
  rows.push_back(MakeRow("FewerValuesThanKeys",
                         S{SortHead(v1::DTYPE_INT32, v1::SORT_OUTPUT_KEYS_AND_VALUES, v1::DTYPE_FLOAT64),
                           SortChunk(400, 792)},
                         kInvalid, {"values length 99 differs from keys length 100", "one value per key"}));
  rows.push_back(MakeRow("KeysNotWholeElements", S{SortHead(v1::DTYPE_INT64), SortChunk(404, 0)}, kInvalid,
                         {"request #1: keys length 404 bytes", "int64 element size 8"}));
  {
    S s{SortHead()};
    s[0].mutable_header()->set_element_count(uint64_t{1} << 40);
    rows.push_back(MakeRow("DeclaredCountAboveMaxSortBytes", s, kExhausted,
                           {"header.element_count=1099511627776", "--max-sort-bytes=", "Limits.max_sort_bytes"}));
  }
  {  // 2^62 int32 keys: 2^64 bytes, which a multiplication would wrap to 0 (found in review)
    S s{SortHead()};
    s[0].mutable_header()->set_element_count(uint64_t{1} << 62);
    rows.push_back(MakeRow("DeclaredCountWhoseBytesWrap", s, kExhausted,
                           {"header.element_count=4611686018427387904", "--max-sort-bytes="}));
  }
  rows.push_back(MakeRow("HeaderMissing", S{SortChunk(16, 0)}, kInvalid, {"header missing", "request #0"}));
}

// ---- Scan2D: its header (cols, rows) and a stream that must end on a row boundary.
v1::Scan2DRequest Scan2DHead(v1::DType dtype = v1::DTYPE_INT32, uint64_t cols = 10, int op = v1::OPERATOR_SUM) {
  v1::Scan2DRequest r;
  r.mutable_header()->set_dtype(dtype);
  r.mutable_header()->set_op(static_cast<v1::Operator>(op));
  r.mutable_header()->set_cols(cols);
  return r;
}
v1::Scan2DRequest Scan2DChunk(size_t bytes) {
  v1::Scan2DRequest r;
  r.set_data(Bytes(bytes));
  return r;
}

void Scan2DRows(std::vector<Row>& rows) {
  using S = std::vector<v1::Scan2DRequest>;
  rows.push_back(MakeRow("UnspecifiedDType", S{Scan2DHead(v1::DTYPE_UNSPECIFIED)}, kInvalid,
                         {"header.dtype", "DTYPE_UNSPECIFIED"}));
  rows.push_back(MakeRow("UnknownOperator", S{Scan2DHead(v1::DTYPE_INT32, 10, 42)}, kInvalid, {"header.op", "42"}));
  rows.push_back(MakeRow("BitwiseOnFloat", S{Scan2DHead(v1::DTYPE_FLOAT32, 10, v1::OPERATOR_BIT_XOR)}, kInvalid,
                         {"header.op", "float32"}));
  rows.push_back(MakeRow("ZeroColumns", S{Scan2DHead(v1::DTYPE_INT32, 0)}, kInvalid, {"header.cols=0"}));
  rows.push_back(MakeRow("RowAboveMaxRowBytes", S{Scan2DHead(v1::DTYPE_FLOAT64, uint64_t{1} << 40)}, kExhausted,
                         {"header.cols=1099511627776", "--max-scan2d-row-bytes", "Limits.max_scan2d_row_bytes"}));
  {
    S s{Scan2DHead(v1::DTYPE_INT64, uint64_t{1} << 20)};
    s[0].mutable_header()->set_rows(uint64_t{1} << 50);
    rows.push_back(MakeRow("RowsTimesColsOverflow", s, kInvalid, {"header.rows=1125899906842624", "overflows"}));
  }
  rows.push_back(MakeRow("EndsInsideARow", S{Scan2DHead(v1::DTYPE_INT32, 10), Scan2DChunk(4 * 25)}, kInvalid,
                         {"ended inside a row", "25 elements", "header.cols=10"}));
  {
    S s{Scan2DHead(v1::DTYPE_INT32, 10), Scan2DChunk(4 * 30)};
    s[0].mutable_header()->set_rows(4);
    rows.push_back(MakeRow("FewerRowsThanDeclared", s, kInvalid, {"header.rows=4", "carried 3 rows"}));
    s[0].mutable_header()->set_rows(2);
    rows.push_back(MakeRow("MoreRowsThanDeclared", s, kInvalid, {"more than header.rows=2", "30 elements"}));
  }
  rows.push_back(MakeRow("DataNotWholeElements", S{Scan2DHead(v1::DTYPE_INT64, 10), Scan2DChunk(84)}, kInvalid,
                         {"request #1: data length 84 bytes", "int64 element size 8"}));
  rows.push_back(MakeRow("ChunkAboveLimit", S{Scan2DHead(v1::DTYPE_INT32, 10), Scan2DChunk(kChunkBytes + 40)}, kExhausted,
                         {"exceeds the chunk limit"}));
  rows.push_back(MakeRow("HeaderMissing", S{Scan2DChunk(16)}, kInvalid, {"header missing", "request #0"}));
  // The axis and kind of axis scans (issue 47).
  {
    S s{Scan2DHead(v1::DTYPE_INT32, 10)};
    s[0].mutable_header()->set_axis(static_cast<v1::ScanAxis>(3));
    rows.push_back(MakeRow("UnknownAxis", s, kInvalid, {"header.axis=3", "ScanAxis"}));
    s[0].mutable_header()->set_axis(static_cast<v1::ScanAxis>(-1));
    rows.push_back(MakeRow("NegativeAxis", s, kInvalid, {"header.axis=-1", "ScanAxis"}));
    s[0].mutable_header()->set_axis(v1::SCAN_AXIS_ROWS);
    s[0].mutable_header()->set_kind(static_cast<v1::ScanKind>(2));
    rows.push_back(MakeRow("AxisUnknownKind", s, kInvalid, {"header.kind=2", "ScanKind"}));
    s[0].mutable_header()->set_axis(v1::SCAN_AXIS_BOTH);
    s[0].mutable_header()->set_kind(v1::SCAN_KIND_EXCLUSIVE);
    rows.push_back(MakeRow("ExclusiveOfBothAxes", s, kInvalid,
                           {"header.kind=SCAN_KIND_EXCLUSIVE", "axis scans only", "SCAN_AXIS_BOTH"}));
    s = S{Scan2DHead(v1::DTYPE_FLOAT64, 10, v1::OPERATOR_BIT_AND)};
    s[0].mutable_header()->set_axis(v1::SCAN_AXIS_COLUMNS);
    rows.push_back(MakeRow("AxisBitwiseOnFloat", s, kInvalid, {"header.op", "float64"}));
    s = S{Scan2DHead(v1::DTYPE_INT32, 0)};
    s[0].mutable_header()->set_axis(v1::SCAN_AXIS_ROWS);
    rows.push_back(MakeRow("AxisZeroColumns", s, kInvalid, {"header.cols=0"}));
    s = S{Scan2DHead(v1::DTYPE_INT32, 10), Scan2DChunk(4 * 25)};
    s[0].mutable_header()->set_axis(v1::SCAN_AXIS_COLUMNS);
    s[0].mutable_header()->set_kind(v1::SCAN_KIND_EXCLUSIVE);
    rows.push_back(MakeRow("AxisEndsInsideARow", s, kInvalid, {"ended inside a row", "25 elements"}));
  }
}

// ---- Narrow dtypes (issue 47): Scan's and Reduce's output_dtype, and every other place a
// narrow dtype is not served.
template <class C>
C WithOutput(C r, int output) {
  r.mutable_header()->set_output_dtype(static_cast<v1::DType>(output));
  return r;
}

void NarrowRows(std::vector<Row>& rows) {
  using V = std::vector<v1::ScanRequest>;
  using R = std::vector<v1::ReduceRequest>;
  for (const bool scan : {true, false}) {
    auto add = [&](const std::string& name, auto make, grpc::StatusCode code, std::vector<std::string> expect) {
      if (scan) {
        rows.push_back(MakeRow(name, V(make(v1::ScanRequest{})), code, expect));
      } else {
        rows.push_back(MakeRow(name, R(make(v1::ReduceRequest{})), code, expect));
      }
    };
    auto head = [](auto r, v1::DType dtype, int op = v1::OPERATOR_SUM) {
      r.mutable_header()->set_dtype(dtype);
      r.mutable_header()->set_op(static_cast<v1::Operator>(op));
      return r;
    };
    add("NarrowOutputForIntegers", [&](auto r) { return std::vector{WithOutput(head(r, v1::DTYPE_INT8), v1::DTYPE_INT16)}; },
        kInvalid, {"header.output_dtype=DTYPE_INT16", "header.dtype=DTYPE_INT8", "narrow output"});
    add("OutputDTypeOfAWideInput",
        [&](auto r) { return std::vector{WithOutput(head(r, v1::DTYPE_INT32), v1::DTYPE_INT64)}; }, kInvalid,
        {"header.output_dtype=DTYPE_INT64 differs from header.dtype=DTYPE_INT32"});
    add("UnknownOutputDType", [&](auto r) { return std::vector{WithOutput(head(r, v1::DTYPE_UINT8), 42)}; }, kInvalid,
        {"header.output_dtype=42", "not a known DType"});
    add("IntegerOutputForFloat16",
        [&](auto r) { return std::vector{WithOutput(head(r, v1::DTYPE_FLOAT16), v1::DTYPE_INT64)}; }, kInvalid,
        {"header.output_dtype=DTYPE_INT64", "DTYPE_FLOAT16", "FLOAT32"});
    add("BitwiseOnFloat16", [&](auto r) { return std::vector{head(r, v1::DTYPE_FLOAT16, v1::OPERATOR_BIT_XOR)}; },
        kInvalid, {"header.op=OPERATOR_BIT_XOR", "float16"});
    add("NarrowNotWholeElements",
        [&](auto r) {
          auto d = r;
          d.set_data(std::string(3, '\x07'));
          return std::vector{head(r, v1::DTYPE_INT16), d};
        },
        kInvalid, {"request #1: data length 3 bytes", "int16 element size 2"});
    add("NarrowCountMismatch",
        [&](auto r) {
          auto h = head(r, v1::DTYPE_UINT8);
          h.mutable_header()->set_element_count(5);
          auto d = r;
          d.set_data(std::string(3, '\x07'));
          return std::vector{h, d};
        },
        kInvalid, {"header.element_count=5", "carried 3 elements"});
    add("NarrowInSharedMemory", [&](auto r) { return std::vector{WithShm(head(r, v1::DTYPE_INT8), "in64")}; },
        kInvalid, {"header.shared_memory", "narrow header.dtype=DTYPE_INT8", "in the stream only"});
    add("NarrowInDeviceMemory", [&](auto r) { return std::vector{WithDevice(head(r, v1::DTYPE_FLOAT16))}; }, kInvalid,
        {"header.device_memory", "narrow header.dtype=DTYPE_FLOAT16"});
    add("NarrowOnLanes", [&](auto r) { return std::vector{WithLanes(head(r, v1::DTYPE_UINT16), 0, 2, 64)}; },
        kInvalid, {"header.dtype=DTYPE_UINT16", "no lanes"});
  }
  // SegmentedScan and ReduceByKey accumulate as Scan does: header.output_dtype's rules.
  const std::vector<std::string> narrow_out = {"header.output_dtype=DTYPE_INT16", "header.dtype=DTYPE_INT8",
                                               "narrow output"};
  const std::vector<std::string> float16_out = {"header.output_dtype=DTYPE_INT64", "DTYPE_FLOAT16", "FLOAT32"};
  const std::vector<std::string> wide_out = {"header.output_dtype=DTYPE_INT64 differs from header.dtype=DTYPE_INT32"};
  const std::vector<std::string> bitwise = {"header.op=OPERATOR_BIT_OR", "float16"};
  using G = std::vector<v1::SegmentedScanRequest>;
  using B = std::vector<v1::ReduceByKeyRequest>;
  rows.push_back(MakeRow("NarrowOutputForIntegers", G{WithOutput(SegHead(v1::DTYPE_INT8), v1::DTYPE_INT16)}, kInvalid,
                         narrow_out));
  rows.push_back(MakeRow("NarrowOutputForIntegers", B{WithOutput(ByKeyHead(v1::DTYPE_INT8), v1::DTYPE_INT16)},
                         kInvalid, narrow_out));
  rows.push_back(MakeRow("IntegerOutputForFloat16", G{WithOutput(SegHead(v1::DTYPE_FLOAT16), v1::DTYPE_INT64)},
                         kInvalid, float16_out));
  rows.push_back(MakeRow("IntegerOutputForFloat16", B{WithOutput(ByKeyHead(v1::DTYPE_FLOAT16), v1::DTYPE_INT64)},
                         kInvalid, float16_out));
  rows.push_back(MakeRow("OutputDTypeOfAWideInput", G{WithOutput(SegHead(v1::DTYPE_INT32), v1::DTYPE_INT64)},
                         kInvalid, wide_out));
  rows.push_back(MakeRow("OutputDTypeOfAWideInput", B{WithOutput(ByKeyHead(v1::DTYPE_INT32), v1::DTYPE_INT64)},
                         kInvalid, wide_out));
  rows.push_back(MakeRow("UnknownOutputDType", B{WithOutput(ByKeyHead(v1::DTYPE_UINT16), 42)}, kInvalid,
                         {"header.output_dtype=42", "not a known DType"}));
  rows.push_back(MakeRow("BitwiseOnFloat16", G{SegHead(v1::DTYPE_FLOAT16, v1::DTYPE_INT64, v1::OPERATOR_BIT_OR)},
                         kInvalid, bitwise));
  rows.push_back(MakeRow("BitwiseOnFloat16", B{ByKeyHead(v1::DTYPE_FLOAT16, v1::DTYPE_INT32, v1::OPERATOR_BIT_OR)},
                         kInvalid, bitwise));
  rows.push_back(MakeRow("NarrowNotWholeElements", G{SegHead(v1::DTYPE_INT16), SegChunk(3, 8)}, kInvalid,
                         {"request #1: data length 3 bytes", "int16 element size 2"}));
  rows.push_back(MakeRow("NarrowKeysOutOfStep", B{ByKeyHead(v1::DTYPE_UINT8), ByKeyChunk(3, 8)}, kInvalid,
                         {"keys length 2", "data length 3"}));
  rows.push_back(MakeRow("NarrowInDeviceMemory", G{WithDevice(SegHead(v1::DTYPE_UINT8))}, kInvalid,
                         {"header.device_memory", "narrow header.dtype=DTYPE_UINT8", "in the stream only"}));
  // Compact, Sort and Histogram take them as they are, in the stream only.
  using K = std::vector<v1::CompactRequest>;
  rows.push_back(MakeRow("NarrowNotWholeElements", K{CompactHead(v1::DTYPE_FLOAT16, false), Data<v1::CompactRequest>(5)}, kInvalid,
                         {"request #1: values length 5 bytes", "float16 element size 2"}));
  rows.push_back(MakeRow("NarrowInSharedMemory", K{WithShm(CompactHead(v1::DTYPE_INT8, false), "in64")}, kInvalid,
                         {"header.shared_memory", "narrow header.dtype=DTYPE_INT8", "in the stream only"}));
  rows.push_back(MakeRow("NarrowInDeviceMemory", K{WithDevice(CompactHead(v1::DTYPE_UINT16, false))}, kInvalid,
                         {"header.device_memory", "narrow header.dtype=DTYPE_UINT16"}));
  rows.push_back(MakeRow("NarrowOnLanes", K{WithLanes(CompactHead(v1::DTYPE_INT16, false), 0, 2, 64)}, kInvalid,
                         {"header.dtype=DTYPE_INT16", "no lanes"}));
  rows.push_back(MakeRow("NarrowFlagsOutOfStep", K{CompactHead(v1::DTYPE_UINT8, true), ValuesAndFlags(4, 3, 1)}, kInvalid,
                         {"flags length 3 differs from values length 4"}));
  rows.push_back(MakeRow("NarrowInDeviceMemory", std::vector{WithDeviceInput(HistogramHead(v1::DTYPE_FLOAT16))},
                         kInvalid, {"header.device_memory", "narrow header.dtype=DTYPE_FLOAT16"}));
  rows.push_back(MakeRow("NarrowNotWholeElements", std::vector{HistogramHead(v1::DTYPE_INT16), Data<v1::HistogramRequest>(7)},
                         kInvalid, {"request #1: data length 7 bytes", "int16 element size 2"}));
  using T = std::vector<v1::SortRequest>;
  rows.push_back(MakeRow("NarrowNotWholeElements", T{SortHead(v1::DTYPE_UINT16), SortChunk(3, 0)}, kInvalid,
                         {"request #1: keys length 3 bytes", "uint16 element size 2"}));
  rows.push_back(MakeRow("NarrowValuesNotWhole",
                         T{SortHead(v1::DTYPE_INT32, v1::SORT_OUTPUT_KEYS_AND_VALUES, v1::DTYPE_FLOAT16), SortChunk(8, 3)},
                         kInvalid, {"request #1: values length 3 bytes", "values_dtype float16 size 2"}));
  rows.push_back(MakeRow("NarrowInDeviceMemory", T{WithDeviceInput(SortHead(v1::DTYPE_INT8))}, kInvalid,
                         {"header.device_memory", "narrow header.dtype=DTYPE_INT8"}));
  rows.push_back(
      MakeRow("NarrowValuesInDeviceMemory",
              T{WithDeviceInput(SortHead(v1::DTYPE_INT32, v1::SORT_OUTPUT_KEYS_AND_VALUES, v1::DTYPE_UINT8))}, kInvalid,
              {"header.device_memory", "narrow header.values_dtype=DTYPE_UINT8"}));
  // Where narrow dtypes are not served (keys): the field named, and what is.
  using D = std::vector<v1::Scan2DRequest>;
  rows.push_back(MakeRow("NarrowOutputForIntegers", D{WithOutput(Scan2DHead(v1::DTYPE_INT8), v1::DTYPE_INT16)},
                         kInvalid, narrow_out));
  rows.push_back(MakeRow("IntegerOutputForFloat16", D{WithOutput(Scan2DHead(v1::DTYPE_FLOAT16), v1::DTYPE_INT64)},
                         kInvalid, float16_out));
  rows.push_back(MakeRow("OutputDTypeOfAWideInput", D{WithOutput(Scan2DHead(v1::DTYPE_INT32), v1::DTYPE_INT64)},
                         kInvalid, wide_out));
  {
    D d{Scan2DHead(v1::DTYPE_UINT8, 10), Scan2DChunk(25)};  // 25 one-byte elements: 2.5 rows of 10
    d[0].mutable_header()->set_axis(v1::SCAN_AXIS_ROWS);
    rows.push_back(MakeRow("NarrowEndsInsideARow", d, kInvalid, {"ended inside a row", "25 elements"}));
  }
  rows.push_back(MakeRow("NarrowKeyDType", std::vector{SegHead(v1::DTYPE_INT32, v1::DTYPE_INT16)}, kInvalid,
                         {"header.key_dtype=DTYPE_INT16", "narrow dtypes"}));
  rows.push_back(MakeRow("NarrowKeyDType", std::vector{ByKeyHead(v1::DTYPE_INT8, v1::DTYPE_UINT8)}, kInvalid,
                         {"header.key_dtype=DTYPE_UINT8", "narrow dtypes"}));
}

void LaneRows(std::vector<Row>& rows) {
  using V = std::vector<v1::ScanRequest>;
  using K = std::vector<v1::CompactRequest>;
  ForEveryRpc(rows, "LanesArrayIdNot16Bytes", kInvalid, {"header.lanes.array_id is 5 bytes", "exactly 16"}, [](auto t) {
    using C = typename decltype(t)::type;
    return std::vector<C>{WithLanes(Head<C>(), 0, 2, 64, 5)};
  });
  ForEveryRpc(rows, "LanesCountZero", kInvalid, {"header.lanes.lane_count=0"}, [](auto t) {
    using C = typename decltype(t)::type;
    return std::vector<C>{WithLanes(Head<C>(), 0, 0, 64)};
  });
  ForEveryRpc(rows, "LanesCountAboveMax", kInvalid, {"header.lanes.lane_count=1000", "--max-lanes=64"}, [](auto t) {
    using C = typename decltype(t)::type;
    return std::vector<C>{WithLanes(Head<C>(), 0, 1000, 64)};
  });
  ForEveryRpc(rows, "LaneNotBelowCount", kInvalid,
              {"header.lanes.lane=3 is not below header.lanes.lane_count=3"}, [](auto t) {
                using C = typename decltype(t)::type;
                return std::vector<C>{WithLanes(Head<C>(), 3, 3, 64)};
              });
  rows.push_back(MakeRow("LanesChunkElementsZero", V{WithLanes(ScanHead(), 0, 2, 0)}, kInvalid,
                         {"header.lanes.chunk_elements=0"}));
  rows.push_back(MakeRow("LanesChunkElementsAboveChunkLimit", V{WithLanes(ScanHead(), 0, 2, 2000)}, kInvalid,
                         {"header.lanes.chunk_elements=2000", "chunk limit of 4096 bytes"}));
  ForEveryRpc(rows, "LaneChunkAboveChunkElements", kInvalid,
              {"request #1 of lanes.lane=0: 32 elements is more than lanes.chunk_elements=16"}, [](auto t) {
                using C = typename decltype(t)::type;
                return std::vector<C>{WithLanes(Head<C>(), 0, 1, 16), Data<C>(32 * 4)};
              });
  ForEveryRpc(rows, "LaneChunkAfterShortChunk", kInvalid,
              {"request #2 of lanes.lane=0: a chunk after this lane's short chunk", "lanes.chunk_elements=16"},
              [](auto t) {
                using C = typename decltype(t)::type;
                return std::vector<C>{WithLanes(Head<C>(), 0, 1, 16), Data<C>(8 * 4), Data<C>(16 * 4)};
              });
  rows.push_back(MakeRow("LaneFlagsNotWithItsValues", K{WithLanes(CompactHead(), 0, 1, 16), ValuesAndFlags(16, 8)},
                         kInvalid, {"request #1 of lanes.lane=0: flags length 8 differs from its 16 values"}));
  ForEveryRpc(rows, "LaneWithoutItsSiblings", grpc::StatusCode::DEADLINE_EXCEEDED,
              {"lane(s) 1 of lanes.lane_count=2 never arrived within --lane-wait-ms=300"}, [](auto t) {
                using C = typename decltype(t)::type;
                return std::vector<C>{WithLanes(Head<C>(), 0, 2, 16), Data<C>(16 * 4)};
              });
}

std::vector<Row> Rows() {
  std::vector<Row> rows;
  using V = std::vector<v1::ScanRequest>;
  using R = std::vector<v1::ReduceRequest>;
  using K = std::vector<v1::CompactRequest>;

  // ---- header missing, repeated, after data; empty stream
  ForEveryRpc(rows, "HeaderMissing", kInvalid, {"header missing", "request #0"}, [](auto t) {
    using C = typename decltype(t)::type;
    return std::vector<C>{Data<C>(16), Data<C>(16)};
  });
  ForEveryRpc(rows, "HeaderAfterData", kInvalid, {"header missing", "request #0"}, [](auto t) {
    using C = typename decltype(t)::type;
    return std::vector<C>{Data<C>(16), Head<C>()};
  });
  ForEveryRpc(rows, "HeaderRepeated", kInvalid, {"header repeated in request #2"}, [](auto t) {
    using C = typename decltype(t)::type;
    return std::vector<C>{Head<C>(), Data<C>(16), Head<C>()};
  });
  ForEveryRpc(rows, "HeaderRepeatedWithData", kInvalid, {"header repeated in request #1"}, [](auto t) {
    using C = typename decltype(t)::type;
    return std::vector<C>{WithData(Head<C>(), 16), WithData(Head<C>(), 16)};
  });
  ForEveryRpc(rows, "EmptyStream", kInvalid, {"empty stream", "first request (the header)"},
              [](auto t) { return std::vector<typename decltype(t)::type>{}; });

  // ---- unknown enum values
  ForEveryRpc(rows, "UnknownDType", kInvalid, {"header.dtype=42", "not a known DType"}, [](auto t) {
    using C = typename decltype(t)::type;
    return std::vector<C>{WithDType(Head<C>(), 42), Data<C>(16)};
  });
  ForEveryRpc(rows, "NegativeDType", kInvalid, {"header.dtype=-3", "not a known DType"}, [](auto t) {
    using C = typename decltype(t)::type;
    return std::vector<C>{WithDType(Head<C>(), -3)};
  });
  ForEveryRpc(rows, "UnspecifiedDType", kInvalid, {"header.dtype", "DTYPE_UNSPECIFIED"}, [](auto t) {
    using C = typename decltype(t)::type;
    return std::vector<C>{WithDType(Head<C>(), v1::DTYPE_UNSPECIFIED), Data<C>(16)};
  });
  rows.push_back(MakeRow("UnknownOperator", V{ScanHead(v1::DTYPE_INT32, 99)}, kInvalid, {"header.op=99", "not a known Operator"}));
  rows.push_back(MakeRow("UnknownOperator", R{ReduceHead(v1::DTYPE_UINT64, 8)}, kInvalid, {"header.op=8", "not a known Operator"}));
  rows.push_back(MakeRow("UnspecifiedOperator", V{ScanHead(v1::DTYPE_INT32, 0)}, kInvalid, {"header.op", "OPERATOR_UNSPECIFIED"}));
  rows.push_back(MakeRow("UnspecifiedOperator", R{ReduceHead(v1::DTYPE_FLOAT32, 0)}, kInvalid, {"header.op", "OPERATOR_UNSPECIFIED"}));
  {
    auto h = ScanHead();
    h.mutable_header()->set_kind(static_cast<v1::ScanKind>(7));
    rows.push_back(MakeRow("UnknownKind", V{h}, kInvalid, {"header.kind=7", "not a known ScanKind"}));
    h = ScanHead();
    h.mutable_header()->set_algorithm(static_cast<v1::ScanAlgorithm>(77));
    rows.push_back(MakeRow("UnknownAlgorithm", V{h}, kInvalid, {"header.algorithm=77", "not a known ScanAlgorithm"}));
    auto c = CompactHead();
    c.mutable_header()->set_output(static_cast<v1::CompactOutput>(9));
    rows.push_back(MakeRow("UnknownOutput", K{c}, kInvalid, {"header.output=9", "not a known CompactOutput"}));
    c = CompactHead(v1::DTYPE_INT32, false);
    c.mutable_header()->mutable_predicate()->set_op(static_cast<v1::PredicateOp>(55));
    rows.push_back(MakeRow("UnknownPredicateOp", K{c}, kInvalid, {"header.predicate.op=55", "not a known PredicateOp"}));
    c.mutable_header()->mutable_predicate()->set_op(v1::PREDICATE_OP_UNSPECIFIED);
    rows.push_back(MakeRow("UnspecifiedPredicateOp", K{c}, kInvalid, {"header.predicate.op", "PREDICATE_OP_UNSPECIFIED"}));
    c = CompactHead();
    c.mutable_header()->clear_selector();
    rows.push_back(MakeRow("NoSelector", K{c}, kInvalid, {"header has no selector", "use_flags=true or a predicate"}));
    c.mutable_header()->set_use_flags(false);
    rows.push_back(MakeRow("UseFlagsFalse", K{c}, kInvalid, {"header.use_flags=false"}));
  }
  {
    Row row = MakeRow("AlgorithmNotOnThisEngine", V{WithData(ScanHead(), 64)}, kUnimplemented,
                      {"is not available on the"});
    row.missing_algorithm = true;  // the algorithm and its name are filled in when the row runs
    rows.push_back(row);
  }

  // ---- bitwise operator on floats
  rows.push_back(MakeRow("BitAndOnFloat32", V{ScanHead(v1::DTYPE_FLOAT32, v1::OPERATOR_BIT_AND)}, kInvalid,
                         {"header.op=OPERATOR_BIT_AND", "dtype float32"}));
  rows.push_back(MakeRow("BitOrOnFloat64", V{WithData(ScanHead(v1::DTYPE_FLOAT64, v1::OPERATOR_BIT_OR), 64)}, kInvalid,
                         {"header.op=OPERATOR_BIT_OR", "dtype float64"}));
  rows.push_back(MakeRow("BitXorOnFloat64", R{ReduceHead(v1::DTYPE_FLOAT64, v1::OPERATOR_BIT_XOR)}, kInvalid,
                         {"header.op=OPERATOR_BIT_XOR", "dtype float64"}));
  rows.push_back(MakeRow("BitAndOnFloat32", R{ReduceHead(v1::DTYPE_FLOAT32, v1::OPERATOR_BIT_AND)}, kInvalid,
                         {"header.op=OPERATOR_BIT_AND", "dtype float32"}));

  // ---- chunk length not a multiple of the element size
  ForEveryRpc(rows, "ChunkNotWholeElements", kInvalid,
              {"request #1: $F length 1023 bytes", "not a multiple of the int64 element size 8"}, [](auto t) {
                using C = typename decltype(t)::type;
                return std::vector<C>{Head<C>(v1::DTYPE_INT64), Data<C>(1023)};
              });
  ForEveryRpc(rows, "FirstChunkNotWholeElements", kInvalid,
              {"request #0: $F length 6 bytes", "not a multiple of the float32 element size 4"}, [](auto t) {
                using C = typename decltype(t)::type;
                return std::vector<C>{WithData(Head<C>(v1::DTYPE_FLOAT32), 6)};
              });

  // ---- declared count larger and smaller than received
  ForEveryRpc(rows, "DeclaredCountLarger", kInvalid, {"header.element_count=100", "stream carried 50 elements"},
              [](auto t) {
                using C = typename decltype(t)::type;
                return std::vector<C>{WithCount(Head<C>(), 100), Data<C>(50 * 4)};
              });
  ForEveryRpc(rows, "DeclaredCountSmaller", kInvalid, {"header.element_count=10", "(50 so far)"}, [](auto t) {
    using C = typename decltype(t)::type;
    return std::vector<C>{WithCount(Head<C>(), 10), Data<C>(50 * 4)};
  });
  ForEveryRpc(rows, "DeclaredCountWithNoData", kInvalid, {"header.element_count=3", "stream carried 0 elements"},
              [](auto t) {
                using C = typename decltype(t)::type;
                return std::vector<C>{WithCount(Head<C>(), 3)};
              });

  // ---- flags and values of different lengths (Compact, use_flags)
  rows.push_back(MakeRow("FewerFlagsThanValues", K{CompactHead(), ValuesAndFlags(100, 99)}, kInvalid,
                         {"flags length 99", "values length 100"}));
  rows.push_back(MakeRow("MoreFlagsThanValues", K{CompactHead(), ValuesAndFlags(100, 101)}, kInvalid,
                         {"flags length 101", "values length 100"}));
  rows.push_back(MakeRow("FlagsButNoValues", K{CompactHead(), ValuesAndFlags(0, 8)}, kInvalid,
                         {"flags length 8", "values length 0"}));
  rows.push_back(MakeRow("FlagsWithPredicate", K{CompactHead(v1::DTYPE_INT32, false), ValuesAndFlags(10, 10)}, kInvalid,
                         {"request #1: flags sent (10 bytes)", "selects by predicate"}));
  {
    K far = {CompactHead()};
    for (int i = 0; i < 6; ++i) far.push_back(ValuesAndFlags(kChunkBytes / 4, 0));
    rows.push_back(MakeRow("FlagsFarOutOfStep", far, kInvalid, {"request #5: flags (0 so far)", "out of step by more than 4096"}));
  }
  rows.push_back(MakeRow("FlagsChunkAboveLimit", K{CompactHead(), ValuesAndFlags(0, 2 * kChunkBytes)}, kExhausted,
                         {"request #1: flags length 8192 bytes", "chunk limit of 4096 bytes"}));

  // ---- predicate threshold of the wrong kind (or missing, or out of the dtype's range)
  {
    auto c = CompactPredicate(v1::DTYPE_INT32, v1::PREDICATE_OP_LT);
    c.mutable_header()->mutable_predicate()->mutable_threshold()->set_float_value(1.5);
    rows.push_back(MakeRow("FloatThresholdForInt32", K{c}, kInvalid,
                           {"header.predicate.threshold must be an int_value or uint_value for dtype int32", "float_value=1.5"}));
    c = CompactPredicate(v1::DTYPE_FLOAT64, v1::PREDICATE_OP_GE);
    c.mutable_header()->mutable_predicate()->mutable_threshold()->set_int_value(3);
    rows.push_back(MakeRow("IntThresholdForFloat64", K{c}, kInvalid,
                           {"header.predicate.threshold must be a float_value for dtype float64", "int_value=3"}));
    c = CompactPredicate(v1::DTYPE_FLOAT32, v1::PREDICATE_OP_EQ);
    c.mutable_header()->mutable_predicate()->mutable_threshold()->set_uint_value(7);
    rows.push_back(MakeRow("UintThresholdForFloat32", K{c}, kInvalid,
                           {"header.predicate.threshold must be a float_value for dtype float32", "uint_value=7"}));
    c = CompactPredicate(v1::DTYPE_UINT32, v1::PREDICATE_OP_GT);
    c.mutable_header()->mutable_predicate()->mutable_threshold()->set_int_value(-1);
    rows.push_back(MakeRow("NegativeThresholdForUint32", K{c}, kInvalid,
                           {"header.predicate.threshold=-1", "does not fit dtype uint32"}));
    c = CompactPredicate(v1::DTYPE_INT64, v1::PREDICATE_OP_LE);
    c.mutable_header()->mutable_predicate()->mutable_threshold()->set_uint_value(uint64_t{1} << 63);
    rows.push_back(MakeRow("HugeUintThresholdForInt64", K{c}, kInvalid,
                           {"header.predicate.threshold=9223372036854775808", "does not fit dtype int64"}));
    c = CompactPredicate(v1::DTYPE_FLOAT32, v1::PREDICATE_OP_GT);
    c.mutable_header()->mutable_predicate()->mutable_threshold()->set_float_value(1e300);
    rows.push_back(MakeRow("Float64ThresholdBeyondFloat32", K{c}, kInvalid,
                           {"header.predicate.threshold=1e+300", "does not fit dtype float32"}));
    c = CompactPredicate(v1::DTYPE_INT32, v1::PREDICATE_OP_EQ);
    rows.push_back(MakeRow("ThresholdMissing", K{c}, kInvalid, {"header.predicate.threshold is required"}));
    c = CompactPredicate(v1::DTYPE_INT32, v1::PREDICATE_OP_IN_RANGE);
    c.mutable_header()->mutable_predicate()->mutable_threshold()->set_int_value(0);
    rows.push_back(MakeRow("UpperMissing", K{c}, kInvalid, {"header.predicate.upper is required"}));
    c.mutable_header()->mutable_predicate()->mutable_upper()->set_int_value(int64_t{1} << 40);
    rows.push_back(MakeRow("UpperBeyondInt32", K{c}, kInvalid,
                           {"header.predicate.upper=1099511627776", "does not fit dtype int32"}));
    c.mutable_header()->mutable_predicate()->mutable_upper()->set_float_value(2.0);
    rows.push_back(MakeRow("FloatUpperForInt32", K{c}, kInvalid,
                           {"header.predicate.upper must be an int_value or uint_value", "float_value=2"}));
  }

  // ---- a chunk above the chunk limit; a call above --max-request-bytes; a message above the
  // gRPC receive limit (refused by gRPC itself, which names the sizes but no field)
  ForEveryRpc(rows, "ChunkAboveLimit", kExhausted,
              {"request #1: $F length 8192 bytes", "exceeds the chunk limit of 4096 bytes"}, [](auto t) {
                using C = typename decltype(t)::type;
                return std::vector<C>{Head<C>(), Data<C>(2 * kChunkBytes)};
              });
  ForEveryRpc(rows, "AboveMaxRequestBytes", kExhausted,
              {"--max-request-bytes=65536", "received 69632 so far"}, [](auto t) {
                using C = typename decltype(t)::type;
                std::vector<C> r = {Head<C>()};
                for (uint64_t sent = 0; sent <= kMaxRequestBytes; sent += kChunkBytes) r.push_back(Data<C>(kChunkBytes));
                return r;
              });
  ForEveryRpc(rows, "MessageAboveReceiveLimit", kExhausted, {"larger than max", std::to_string(kReceiveLimit)},
              [](auto t) {
                using C = typename decltype(t)::type;
                return std::vector<C>{Head<C>(), Data<C>(kReceiveLimit + 4096)};
              });
  {
    // Values within the limit, values and flags together above it: flags are input too.
    K r = {CompactHead()};
    for (uint64_t sent = 0; sent + kChunkBytes <= kMaxRequestBytes; sent += kChunkBytes) {
      r.push_back(ValuesAndFlags(kChunkBytes / 4, kChunkBytes / 4));
    }
    rows.push_back(MakeRow("ValuesAndFlagsAboveMaxRequestBytes", r, kExhausted,
                           {"--max-request-bytes=65536", "values and flags"}));
  }
  // Scan is read raw (service/wire.h): encodings protobuf would refuse are refused there too.
  {
    Row row{"MalformedEncoding", Rpc::kScan};
    row.raw = {std::string("\x12\x05" "abc", 5)};  // data says 5 bytes, 3 follow
    row.expect = {"request #0", "the ScanRequest is not a valid message", "field 2 says 5 bytes, 3 remain"};
    rows.push_back(row);
    row.name = "MalformedEncodingAfterAValidChunk";
    row.raw = {ScanHead().SerializeAsString() + Data<v1::ScanRequest>(64).SerializeAsString(),
               std::string("\x0b", 1)};  // field 1 as a group (wire type 3)
    row.expect = {"request #1", "the ScanRequest is not a valid message", "wire type 3 of field 1"};
    rows.push_back(row);
    Row reduce{"Reduce_MalformedEncoding", Rpc::kReduce};
    reduce.raw = {ReduceHead().SerializeAsString(), std::string("\x12\x80", 2)};  // a length cut off
    reduce.expect = {"request #1", "the ReduceRequest is not a valid message", "truncated or overlong length of field 2"};
    rows.push_back(reduce);
    // Compact reads values (2) and flags (3) raw.
    Row compact{"Compact_MalformedFlags", Rpc::kCompact};
    compact.raw = {CompactHead().SerializeAsString() + std::string("\x12\x04" "abcd" "\x1a\x09" "\x01\x00", 10)};
    compact.expect = {"request #0", "the CompactRequest is not a valid message", "field 3 says 9 bytes, 2 remain"};
    rows.push_back(compact);
    compact.name = "Compact_OverlongTag";  // a tag in six bytes: protobuf reads tags in five
    compact.raw = {CompactHead().SerializeAsString(), std::string("\x92\x80\x80\x80\x80\x00\x00", 7)};
    compact.expect = {"request #1", "the CompactRequest is not a valid message", "overlong field tag"};
    rows.push_back(compact);
  }
  LaneRows(rows);
  SharedMemoryRows(rows);
  DeviceMemoryRows(rows);
  DeviceMemoryHistogramSortRows(rows);
  DeviceMemorySegmentedRows(rows);
  HistogramRows(rows);
  SegmentedRows(rows);
  ReduceByKeyRows(rows);
  SortRows(rows);
  Scan2DRows(rows);
  NarrowRows(rows);
  return rows;
}

// ---------------------------------------------------------------------------------------------

// A valid Scan, in progress on the server for as long as this object lives: its header and
// first chunk were sent and the first result received before the constructor returns; Finish
// sends the second chunk, half-closes and checks every result against the reference.
class InFlightScan {
 public:
  static constexpr size_t kElems = kChunkBytes / sizeof(int64_t);

  explicit InFlightScan(v1::GpuScan::Stub& stub) {
    GPUSCAN_SEEDED_RNG(rng);
    x_ = testing::RandomInput<int64_t, ops::Sum<int64_t>>(2 * kElems, rng);
    ctx_.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    stream_ = stub.Scan(&ctx_);
    v1::ScanRequest first = ScanHead(v1::DTYPE_INT64);
    first.set_data(Chunk(0));
    EXPECT_TRUE(stream_->Write(first));
    v1::ScanResponse resp;
    EXPECT_TRUE(stream_->Read(&resp)) << "the valid call got no first result";
    Append(resp);
  }

  void Finish() {
    v1::ScanRequest second;
    second.set_data(Chunk(1));
    EXPECT_TRUE(stream_->Write(second));
    stream_->WritesDone();
    v1::ScanResponse resp;
    while (stream_->Read(&resp)) Append(resp);
    const grpc::Status s = stream_->Finish();
    EXPECT_TRUE(s.ok()) << "the valid call beside the bad one failed: " << s.error_message();
    EXPECT_EQ(got_, (testing::ScanRef<int64_t, ops::Sum<int64_t>>(x_, false))) << "the valid call's result is wrong";
  }

 private:
  std::string Chunk(int i) const {
    return std::string(reinterpret_cast<const char*>(x_.data() + i * kElems), kElems * sizeof(int64_t));
  }
  void Append(const v1::ScanResponse& resp) {
    const size_t n = resp.data().size() / sizeof(int64_t);
    const size_t at = got_.size();
    got_.resize(at + n);
    if (n) std::memcpy(got_.data() + at, resp.data().data(), n * sizeof(int64_t));
  }

  std::vector<int64_t> x_, got_;
  grpc::ClientContext ctx_;
  std::unique_ptr<grpc::ClientReaderWriter<v1::ScanRequest, v1::ScanResponse>> stream_;
};

class BadInputMatrix : public ::testing::TestWithParam<Row> {
 protected:
  static void SetUpTestSuite() { server_ = new TestServer(MatrixServerOptions()); }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }

  // Sends the row's requests on one call (stopping where the server has already failed it),
  // half-closes, drains the responses and returns the status.
  template <class Req, class Resp, class Start>
  static grpc::Status RunBidi(Start start, const std::vector<Req>& requests) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    auto stream = start(&ctx);
    for (const Req& r : requests) {
      if (!stream->Write(r)) break;
    }
    stream->WritesDone();
    Resp resp;
    while (stream->Read(&resp)) {
    }
    return stream->Finish();
  }

  template <class Req, class Start>
  static grpc::Status RunUnary(Start start, const std::vector<Req>& requests) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    auto writer = start(&ctx);
    for (const Req& r : requests) {
      if (!writer->Write(r)) break;
    }
    writer->WritesDone();
    return writer->Finish();
  }

  // A Reduce call whose requests are the given bytes, as they are, on the wire.
  static grpc::Status RunRawReduce(const std::vector<std::string>& messages) {
    auto channel = grpc::CreateChannel(server_->target(), grpc::InsecureChannelCredentials());
    grpc::internal::RpcMethod method("/gpuscan.v1.GpuScan/Reduce", grpc::internal::RpcMethod::CLIENT_STREAMING,
                                     channel);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    grpc::ByteBuffer response;
    std::unique_ptr<grpc::ClientWriter<grpc::ByteBuffer>> stream(
        grpc::internal::ClientWriterFactory<grpc::ByteBuffer>::Create(channel.get(), method, &ctx, &response));
    for (const std::string& m : messages) {
      grpc::Slice slice(m);
      if (!stream->Write(grpc::ByteBuffer(&slice, 1))) break;
    }
    stream->WritesDone();
    return stream->Finish();
  }

  // A bidirectional call (Scan, Compact) whose requests are the given bytes, as they are, on the wire.
  static grpc::Status RunRawBidi(const char* method_name, const std::vector<std::string>& messages) {
    auto channel = grpc::CreateChannel(server_->target(), grpc::InsecureChannelCredentials());
    grpc::internal::RpcMethod method(method_name, grpc::internal::RpcMethod::BIDI_STREAMING, channel);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    std::unique_ptr<grpc::ClientReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>> stream(
        grpc::internal::ClientReaderWriterFactory<grpc::ByteBuffer, grpc::ByteBuffer>::Create(channel.get(), method,
                                                                                            &ctx));
    for (const std::string& m : messages) {
      grpc::Slice slice(m);
      if (!stream->Write(grpc::ByteBuffer(&slice, 1))) break;
    }
    stream->WritesDone();
    grpc::ByteBuffer resp;
    while (stream->Read(&resp)) {
    }
    return stream->Finish();
  }

  static grpc::Status Send(v1::GpuScan::Stub& stub, const Row& row) {
    if (!row.raw.empty()) {
      switch (row.rpc) {
        case Rpc::kReduce: return RunRawReduce(row.raw);
        case Rpc::kCompact: return RunRawBidi("/gpuscan.v1.GpuScan/Compact", row.raw);
        default: return RunRawBidi("/gpuscan.v1.GpuScan/Scan", row.raw);
      }
    }
    switch (row.rpc) {
      case Rpc::kScan:
        return RunBidi<v1::ScanRequest, v1::ScanResponse>([&](grpc::ClientContext* c) { return stub.Scan(c); },
                                                          row.scan);
      case Rpc::kCompact:
        return RunBidi<v1::CompactRequest, v1::CompactResponse>(
            [&](grpc::ClientContext* c) { return stub.Compact(c); }, row.compact);
      case Rpc::kReduce: {
        v1::ReduceResponse resp;
        return RunUnary([&](grpc::ClientContext* c) { return stub.Reduce(c, &resp); }, row.reduce);
      }
      case Rpc::kHistogram: {
        v1::HistogramResponse resp;
        return RunUnary([&](grpc::ClientContext* c) { return stub.Histogram(c, &resp); }, row.histogram);
      }
      case Rpc::kSegmented:
        return RunBidi<v1::SegmentedScanRequest, v1::ScanResponse>(
            [&](grpc::ClientContext* c) { return stub.SegmentedScan(c); }, row.segmented);
      case Rpc::kReduceByKey:
        return RunBidi<v1::ReduceByKeyRequest, v1::ReduceByKeyResponse>(
            [&](grpc::ClientContext* c) { return stub.ReduceByKey(c); }, row.by_key);
      case Rpc::kSort:
        return RunBidi<v1::SortRequest, v1::SortResponse>([&](grpc::ClientContext* c) { return stub.Sort(c); },
                                                          row.sort);
      case Rpc::kScan2D:
        return RunBidi<v1::Scan2DRequest, v1::ScanResponse>([&](grpc::ClientContext* c) { return stub.Scan2D(c); },
                                                            row.scan2d);
    }
    return {grpc::StatusCode::INTERNAL, "unknown rpc"};
  }

  // The row as this server's engine needs it (the algorithm it lacks, for that one row).
  static Row Prepare(Row row) {
    if (!row.missing_algorithm) return row;
    const auto offered = server_->server().engine().scan_algorithms();
    for (int a = v1::ScanAlgorithm_MIN; a <= v1::ScanAlgorithm_MAX; ++a) {
      const auto ea = static_cast<engine::ScanAlgorithm>(a);
      if (std::find(offered.begin(), offered.end(), ea) != offered.end()) continue;
      row.scan[0].mutable_header()->set_algorithm(static_cast<v1::ScanAlgorithm>(a));
      row.expect.push_back("header.algorithm=" + std::string(engine::Name(ea)));
      row.expect.push_back(server_->server().engine().name() + " engine");
      return row;
    }
    ADD_FAILURE() << "the engine offers every scan algorithm; nothing to refuse";
    return row;
  }

  static void ExpectStatus(const Row& row, const grpc::Status& s) {
    EXPECT_EQ(s.error_code(), row.code) << row.name << ": message \"" << s.error_message() << "\"";
    EXPECT_FALSE(s.error_message().empty()) << row.name;
    for (const std::string& e : row.expect) {
      EXPECT_THAT(s.error_message(), HasSubstr(e)) << row.name;
    }
  }

  // A valid call of `rpc` on a fresh client, checked against the reference.
  static void ExpectValidCall(Rpc rpc) {
    Client client(server_->client_options(kChunkBytes));
    GPUSCAN_SEEDED_RNG(rng);
    const size_t n = 3 * kChunkBytes / sizeof(int32_t) + 5;  // several chunks, the last one short
    switch (rpc) {
      case Rpc::kScan: {
        const auto x = testing::RandomInput<int32_t, ops::Sum<int32_t>>(n, rng);
        ScanOptions o;
        o.exclusive = true;
        EXPECT_EQ(client.Scan(x, o).values, (testing::ScanRef<int32_t, ops::Sum<int32_t>>(x, true)));
        break;
      }
      case Rpc::kReduce: {
        const auto x = testing::RandomInput<uint64_t, ops::BitXor<uint64_t>>(n, rng);
        EXPECT_EQ(client.Reduce(x, v1::OPERATOR_BIT_XOR).value, (testing::ReduceRef<uint64_t, ops::BitXor<uint64_t>>(x)));
        break;
      }
      case Rpc::kCompact: {
        const auto x = testing::RandomCompactInput<int32_t>(n, rng);
        CompactOptions o;
        o.use_flags = true;
        o.flags = testing::RandomFlags(n, rng, 0.5);
        o.output = v1::COMPACT_OUTPUT_VALUES_AND_INDICES;
        const auto r = client.Compact(x, o);
        const auto ref = testing::CompactRef(x, o.flags);
        EXPECT_EQ(r.values, ref.values);
        EXPECT_EQ(r.indices, ref.indices);
        break;
      }
      case Rpc::kHistogram: {
        const auto x = testing::RandomInput<int64_t, ops::Sum<int64_t>>(n, rng);
        HistogramBins bins;
        bins.edges = {-1e6, -10, 0, 0, 7, 1e6};
        const HistogramResult r = client.Histogram(x, bins);
        std::vector<uint64_t> want = testing::HistogramRef(x, bins.edges);
        want.resize(5);  // the bins, without below/above/NaN
        EXPECT_EQ(r.counts, want);
        break;
      }
      case Rpc::kSegmented: {
        const auto x = testing::RandomInput<int32_t, ops::Sum<int32_t>>(n, rng);
        const auto keys = testing::RandomSegmentKeys<int64_t>(n, rng, 50);
        SegmentedScanOptions o;
        o.exclusive = true;
        EXPECT_EQ(client.SegmentedScan(x, keys, o).values,
                  (testing::SegmentedScanRef<int32_t, ops::Sum<int32_t>>(x, testing::HeadsOfKeys(keys), true)));
        break;
      }
      case Rpc::kReduceByKey: {
        const auto x = testing::RandomInput<int64_t, ops::Sum<int64_t>>(n, rng);
        const auto keys = testing::RandomSegmentKeys<uint32_t>(n, rng, 50);
        const auto r = client.ReduceByKey(x, keys, v1::OPERATOR_SUM);
        const auto want = testing::ReduceByKeyRef<int64_t, ops::Sum<int64_t>, uint32_t>(x, keys);
        EXPECT_EQ(r.keys, want.first);
        EXPECT_EQ(r.values, want.second);
        break;
      }
      case Rpc::kSort: {
        const auto x = testing::RandomInput<int32_t, ops::Sum<int32_t>>(n, rng);
        const auto r = client.SortPairs(x.data(), x.data(), n, true);
        std::vector<int32_t> want = x;
        std::sort(want.begin(), want.end(), std::greater<int32_t>());
        EXPECT_EQ(r.keys, want);
        EXPECT_EQ(r.values, want);
        break;
      }
      case Rpc::kScan2D: {
        const auto x = testing::RandomInput<int32_t, ops::Sum<int32_t>>(n, rng);
        const auto r = client.Scan2D(x.data(), n / 10, 10);
        const std::vector<int32_t> head(x.begin(), x.begin() + n / 10 * 10);
        EXPECT_EQ(r.values, (testing::Scan2DRef<int32_t, ops::Sum<int32_t>>(head, n / 10, 10)));
        break;
      }
    }
    EXPECT_EQ(client.Health(), "SERVING");
  }

  static TestServer* server_;
};
TestServer* BadInputMatrix::server_ = nullptr;

TEST_P(BadInputMatrix, RightCodeAndMessageWhileServingOthers) {
  const Row row = Prepare(GetParam());
  auto stub = server_->stub();
  InFlightScan valid(*stub);  // a valid call in progress on the same channel
  const grpc::Status s = Send(*stub, row);
  std::printf("%s -> %s: %s\n", row.name.c_str(), StatusCodeName(s.error_code()).c_str(), s.error_message().c_str());
  ExpectStatus(row, s);
  valid.Finish();
  ExpectValidCall(row.rpc);  // and the server keeps serving
}

INSTANTIATE_TEST_SUITE_P(Rows, BadInputMatrix, ::testing::ValuesIn(Rows()),
                         [](const ::testing::TestParamInfo<Row>& info) { return info.param.name; });

// Every row at once, one thread each, with valid calls of every RPC running beside them.
TEST_F(BadInputMatrix, AllRowsAtOnce) {
  const std::vector<Row> rows = Rows();
  std::vector<grpc::Status> got(rows.size());
  std::atomic<bool> stop{false};
  std::atomic<int> valid_calls{0};
  std::vector<std::thread> valid;
  for (Rpc rpc : {Rpc::kScan, Rpc::kReduce, Rpc::kCompact, Rpc::kHistogram, Rpc::kSegmented, Rpc::kReduceByKey, Rpc::kSort}) {
    valid.emplace_back([&, rpc] {
      while (!stop) {
        ExpectValidCall(rpc);
        ++valid_calls;
      }
    });
  }
  std::vector<std::thread> bad;
  for (size_t i = 0; i < rows.size(); ++i) {
    bad.emplace_back([&, i] {
      auto stub = server_->stub();
      got[i] = Send(*stub, Prepare(rows[i]));
    });
  }
  for (auto& t : bad) t.join();
  stop = true;
  for (auto& t : valid) t.join();
  for (size_t i = 0; i < rows.size(); ++i) ExpectStatus(Prepare(rows[i]), got[i]);
  EXPECT_GE(valid_calls.load(), 3);
}

}  // namespace
}  // namespace gpuscan
