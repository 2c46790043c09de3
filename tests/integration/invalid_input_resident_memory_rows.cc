// The bad-input matrix: the resident RPCs' caller memory. PutArrayHeader.shared_memory /
// .device_memory (the array copied in from the caller's memory instead of streamed) and
// GetArrayRequest.shared_memory / .device_memory (the range copied out into it): every way these
// fields can be wrong that the server can tell on the CPU engine, with no --allow-device-ipc
// (the device-memory headers that are well formed get FAILED_PRECONDITION, as an operation's
// do; what the header alone shows comes first). The calls that succeed, and a region cut short
// meanwhile, are in resident_memory_test.cc; device memory on real handles in the cuda suites.
//
// The GetArray rows name the default tenant's array (Row::foreign_id, run as that tenant: 16
// INT32 elements, 64 bytes), since the range is checked before the memory it goes to. None of
// them writes it: the runner checks that the array is unchanged after each.
#include <cstdint>
#include <string>
#include <vector>

#include "invalid_input_matrix.h"

// A named namespace: the unity build merges the files' anonymous namespaces (PutHead, GetRow...).
namespace gpuscan::matrix::resident_memory_rows {

constexpr auto kNotFound = grpc::StatusCode::NOT_FOUND;
constexpr auto kOutOfRange = grpc::StatusCode::OUT_OF_RANGE;
constexpr auto kPrecondition = grpc::StatusCode::FAILED_PRECONDITION;
using P = std::vector<v1::PutArrayRequest>;

const std::string kUuid(16, '\x5a');
const std::string kHandle(64, '\x11');
const std::string kOtherHandle(64, '\x22');

// ---- PutArray: a header alone, its array at shared_memory or device_memory
v1::PutArrayRequest PutShm(const std::string& region, uint64_t bytes = 64, int dtype = v1::DTYPE_INT32,
                           uint64_t offset = 0) {
  v1::PutArrayRequest r;
  r.mutable_header()->set_dtype(static_cast<v1::DType>(dtype));
  v1::SharedMemory* m = r.mutable_header()->mutable_shared_memory();
  m->set_region(region);
  m->set_offset(offset);
  m->set_bytes(bytes);
  return r;
}
v1::PutArrayRequest PutDevice(uint64_t bytes = 64, int dtype = v1::DTYPE_INT32) {
  v1::PutArrayRequest r;
  r.mutable_header()->set_dtype(static_cast<v1::DType>(dtype));
  v1::DeviceMemory* m = r.mutable_header()->mutable_device_memory();
  m->set_device_uuid(kUuid);
  m->set_handle(kHandle);
  m->set_bytes(bytes);
  return r;
}
v1::SharedMemory* Shm(v1::PutArrayRequest& r) { return r.mutable_header()->mutable_shared_memory(); }
v1::DeviceMemory* Dev(v1::PutArrayRequest& r) { return r.mutable_header()->mutable_device_memory(); }
v1::PutArrayRequest Chunk(size_t bytes) {
  v1::PutArrayRequest r;
  r.set_data(Bytes(bytes));
  return r;
}

// ---- GetArray of the default tenant's 16-element array into shared or device memory
Row Get(std::string name, grpc::StatusCode code, std::vector<std::string> expect) {
  Row row{"GetArray_" + std::move(name), Rpc::kGetArray};
  row.get.set_id("prepared by the runner");
  row.foreign_id = true;  // run as the default tenant: the id is that tenant's own array
  row.code = code;
  row.expect = std::move(expect);
  return row;
}
Row GetShm(std::string name, const std::string& region, uint64_t bytes, grpc::StatusCode code,
           std::vector<std::string> expect, uint64_t offset = 0) {
  Row row = Get(std::move(name), code, std::move(expect));
  v1::SharedMemory* m = row.get.mutable_shared_memory();
  m->set_region(region);
  m->set_offset(offset);
  m->set_bytes(bytes);
  return row;
}
Row GetDevice(std::string name, grpc::StatusCode code, std::vector<std::string> expect, uint64_t bytes = 64) {
  Row row = Get(std::move(name), code, std::move(expect));
  v1::DeviceMemory* m = row.get.mutable_device_memory();
  m->set_device_uuid(kUuid);
  m->set_handle(kHandle);
  m->set_bytes(bytes);
  return row;
}

void PutSharedRows(std::vector<Row>& rows) {
  {
    auto both = PutShm("in64");
    Dev(both)->set_device_uuid(kUuid);
    Dev(both)->set_handle(kHandle);
    Dev(both)->set_bytes(64);
    rows.push_back(MakeRow("ShmAndDeviceMemory", P{both}, kInvalid,
                           {"header.device_memory: cannot be combined with header.shared_memory"}));
  }
  // The header comes alone: no data in it, nor in requests after it.
  {
    auto head = PutShm("in64");
    head.set_data(Bytes(4));
    rows.push_back(MakeRow("ShmWithDataInHeader", P{head}, kInvalid,
                           {"data: request 0 carries 4 bytes", "a call with header.shared_memory sends no array data"}));
  }
  rows.push_back(MakeRow("ShmWithDataChunk", P{PutShm("in64"), Chunk(64)}, kInvalid,
                         {"data: request 1 carries 64 bytes", "a call with header.shared_memory sends no array data"}));
  rows.push_back(MakeRow("ShmWithEmptyThenDataChunk", P{PutShm("in64"), Chunk(0), Chunk(8)}, kInvalid,
                         {"data: request 2 carries 8 bytes", "header.shared_memory"}));
  // header.element_count, when set, is bytes / the dtype's size.
  rows.push_back(MakeRow("ShmCountDiffers", P{WithCount(PutShm("in64"), 5)}, kInvalid,
                         {"header.element_count 5 differs from header.shared_memory.bytes 64 (16 elements)"}));
  rows.push_back(MakeRow("ShmCountDiffersInt64", P{WithCount(PutShm("in64", 64, v1::DTYPE_INT64), 16)}, kInvalid,
                         {"header.element_count 16 differs from header.shared_memory.bytes 64 (8 elements)"}));
  rows.push_back(MakeRow("ShmCountWithZeroBytes", P{WithCount(PutShm("in64", 0), 1)}, kInvalid,
                         {"header.element_count 1 differs from header.shared_memory.bytes 0 (0 elements)"}));
  // Whole elements: bytes and offset multiples of the dtype's size.
  rows.push_back(MakeRow("ShmBytesNotWholeElements", P{PutShm("in64", 12, v1::DTYPE_INT64)}, kInvalid,
                         {"header.shared_memory.region \"in64\"", "bytes 12", "element size 8"}));
  rows.push_back(MakeRow("ShmBytesNotWholeElementsCounted", P{WithCount(PutShm("in64", 6), 1)}, kInvalid,
                         {"header.shared_memory.region \"in64\"", "bytes 6", "element size 4"}));
  rows.push_back(MakeRow("ShmOffsetNotWholeElements", P{PutShm("in64", 32, v1::DTYPE_INT32, 2)}, kInvalid,
                         {"header.shared_memory.region \"in64\"", "offset 2", "element size 4"}));
  // The region: a plain file under --shm-dir that holds [offset, offset + bytes).
  rows.push_back(MakeRow("ShmRegionMissing", P{PutShm("nope")}, kNotFound,
                         {"header.shared_memory.region \"nope\"", "no such region under --shm-dir"}));
  rows.push_back(MakeRow("ShmRegionUnset", P{PutShm("")}, kInvalid,
                         {"header.shared_memory.region \"\"", "a region is a plain file name"}));
  rows.push_back(MakeRow("ShmRegionWithSlash", P{PutShm("dir/in64")}, kInvalid,
                         {"header.shared_memory.region \"dir/in64\"", "no '/'"}));
  rows.push_back(MakeRow("ShmRegionParent", P{PutShm("../in64")}, kInvalid,
                         {"header.shared_memory.region \"../in64\"", "a region is a plain file name"}));
  rows.push_back(MakeRow("ShmRegionDotDot", P{PutShm("..")}, kInvalid,
                         {"header.shared_memory.region \"..\"", "not '..'"}));
  rows.push_back(MakeRow("ShmRegionIsASymlink", P{PutShm("link")}, kInvalid,
                         {"header.shared_memory.region \"link\"", "is a symbolic link"}));
  rows.push_back(MakeRow("ShmRegionIsADirectory", P{PutShm("dir")}, kInvalid,
                         {"header.shared_memory.region \"dir\"", "not a regular file"}));
  rows.push_back(MakeRow("ShmPastRegion", P{PutShm("small")}, kOutOfRange,
                         {"header.shared_memory.region \"small\"", "region has 8 bytes, fewer than offset 0 + bytes 64"}));
  rows.push_back(MakeRow("ShmOffsetPastRegion", P{PutShm("in64", 8, v1::DTYPE_INT32, 64)}, kOutOfRange,
                         {"header.shared_memory.region \"in64\"", "region has 64 bytes, fewer than offset 64 + bytes 8"}));
  rows.push_back(MakeRow("ShmOffsetPlusBytesOverflows", P{PutShm("in64", 8, v1::DTYPE_INT32, ~uint64_t{3})}, kOutOfRange,
                         {"header.shared_memory.region \"in64\"", "offset + bytes overflows"}));
  {
    auto arena = PutShm("nope");
    Shm(arena)->set_arena(true);  // changes when a region is registered, never what is checked
    rows.push_back(MakeRow("ShmArenaRegionMissing", P{arena}, kNotFound,
                           {"header.shared_memory.region \"nope\"", "no such region"}));
  }
  // Only the input fields: a PutArray writes nothing into the caller's memory.
  {
    auto r = PutShm("in64");
    Shm(r)->set_output_region("out64");
    rows.push_back(MakeRow("ShmOutputRegion", P{r}, kInvalid,
                           {"header.shared_memory.output_region \"out64\": PutArray writes no output"}));
    r = PutShm("in64");
    Shm(r)->set_output_offset(8);
    rows.push_back(MakeRow("ShmOutputOffset", P{r}, kInvalid,
                           {"header.shared_memory.output_region \"\": PutArray writes no output"}));
    r = PutShm("in64");
    Shm(r)->set_indices_region("flags16");
    rows.push_back(MakeRow("ShmIndicesRegion", P{r}, kInvalid,
                           {"header.shared_memory.indices_region \"flags16\"", "only a Compact asking for indices"}));
    r = PutShm("in64");
    Shm(r)->set_flags_region("flags16");
    rows.push_back(MakeRow("ShmFlagsRegion", P{r}, kInvalid,
                           {"header.shared_memory.flags_region \"flags16\"", "only a Compact with use_flags reads flags"}));
  }
  // The header's own checks come first: the dtype, the declared count against the budget.
  rows.push_back(MakeRow("ShmUnknownDType", P{PutShm("in64", 64, 99)}, kInvalid,
                         {"header.dtype 99 (not a known DType)"}));
  rows.push_back(MakeRow("ShmDeclaredCountAboveBudget",
                         P{WithCount(PutShm("in64", 64, v1::DTYPE_INT64), kResidentBytes / 8 + 1)}, kExhausted,
                         {"header.element_count " + std::to_string(kResidentBytes / 8 + 1), "resident budget"}));
}

void PutDeviceRows(std::vector<Row>& rows) {
  // Well formed: this server does not open device memory (no --allow-device-ipc).
  rows.push_back(MakeRow("DeviceMemoryNotServed", P{PutDevice()}, kPrecondition,
                         {"header.device_memory: this server does not open device memory", "--allow-device-ipc"}));
  rows.push_back(MakeRow("DeviceMemoryZeroBytesNotServed", P{PutDevice(0)}, kPrecondition,
                         {"header.device_memory: this server does not open device memory"}));
  // What the header alone shows, on every server.
  {
    auto r = PutDevice();
    Dev(r)->set_handle(std::string(63, '\x11'));
    rows.push_back(MakeRow("DeviceHandleShort", P{r}, kInvalid,
                           {"header.device_memory.handle has 63 bytes", "cudaIpcMemHandle_t) has 64"}));
    Dev(r)->set_handle(std::string(65, '\x11'));
    rows.push_back(MakeRow("DeviceHandleLong", P{r}, kInvalid, {"header.device_memory.handle has 65 bytes"}));
    Dev(r)->clear_handle();
    rows.push_back(MakeRow("DeviceHandleMissing", P{r}, kInvalid, {"header.device_memory.handle has 0 bytes"}));
  }
  {
    auto r = PutDevice();
    Dev(r)->set_device_uuid(std::string(15, '\x5a'));
    rows.push_back(MakeRow("DeviceUuidShort", P{r}, kInvalid,
                           {"header.device_memory.device_uuid has 15 bytes; a device UUID has 16"}));
    Dev(r)->clear_device_uuid();
    rows.push_back(MakeRow("DeviceUuidMissing", P{r}, kInvalid, {"header.device_memory.device_uuid has 0 bytes"}));
  }
  rows.push_back(MakeRow("DeviceBytesNotWholeElements", P{PutDevice(12, v1::DTYPE_INT64)}, kInvalid,
                         {"header.device_memory.bytes 12 is not a multiple of the element size 8"}));
  {
    auto r = PutDevice();
    Dev(r)->set_offset(2);
    rows.push_back(MakeRow("DeviceOffsetNotWholeElements", P{r}, kInvalid,
                           {"header.device_memory.offset 2 is not a multiple of the element size 4"}));
  }
  rows.push_back(MakeRow("DeviceCountDiffers", P{WithCount(PutDevice(), 5)}, kInvalid,
                         {"header.element_count 5 differs from header.device_memory.bytes 64 (16 elements)"}));
  rows.push_back(MakeRow("DeviceCountWithZeroBytes", P{WithCount(PutDevice(0), 2)}, kInvalid,
                         {"header.element_count 2 differs from header.device_memory.bytes 0 (0 elements)"}));
  // Only the input fields.
  {
    auto r = PutDevice();
    Dev(r)->set_output_handle(kOtherHandle);
    rows.push_back(MakeRow("DeviceOutputHandle", P{r}, kInvalid,
                           {"header.device_memory.output_handle (64 bytes): PutArray writes no output"}));
    r = PutDevice();
    Dev(r)->set_output_offset(8);
    rows.push_back(MakeRow("DeviceOutputOffset", P{r}, kInvalid,
                           {"header.device_memory.output_handle (0 bytes): PutArray writes no output"}));
    r = PutDevice();
    Dev(r)->set_output_handle(std::string(10, '\x22'));
    rows.push_back(MakeRow("DeviceOutputHandleShort", P{r}, kInvalid, {"header.device_memory.output_handle has 10 bytes"}));
    r = PutDevice();
    Dev(r)->set_indices_handle(kOtherHandle);
    rows.push_back(MakeRow("DeviceIndicesHandle", P{r}, kInvalid,
                           {"header.device_memory.indices_handle (64 bytes)", "only a Compact asking for indices"}));
    r = PutDevice();
    Dev(r)->set_flags_handle(kOtherHandle);
    rows.push_back(MakeRow("DeviceFlagsHandle", P{r}, kInvalid,
                           {"header.device_memory.flags_handle (64 bytes)", "only a Compact with use_flags"}));
    r = PutDevice();
    Dev(r)->set_values_handle(kOtherHandle);
    rows.push_back(MakeRow("DeviceValuesHandle", P{r}, kInvalid,
                           {"header.device_memory.values_handle (64 bytes)", "only a Sort with values"}));
    r = PutDevice();
    Dev(r)->set_keys_handle(kOtherHandle);
    rows.push_back(MakeRow("DeviceKeysHandle", P{r}, kInvalid,
                           {"header.device_memory.keys_handle (64 bytes)", "only a SegmentedScan reads keys"}));
  }
  // Data: the header is refused first here (no device memory on this server); the header check
  // of a served one is in the cuda suites.
  rows.push_back(MakeRow("DeviceWithDataChunk", P{PutDevice(), Chunk(64)}, kPrecondition,
                         {"header.device_memory: this server does not open device memory"}));
}

void GetSharedRows(std::vector<Row>& rows) {
  {
    Row row = GetShm("ShmAndDeviceMemory", "in64", 64, kInvalid,
                     {"device_memory: cannot be combined with shared_memory (the range goes to one place)"});
    row.get.mutable_device_memory()->set_device_uuid(kUuid);
    row.get.mutable_device_memory()->set_handle(kHandle);
    row.get.mutable_device_memory()->set_bytes(64);
    rows.push_back(row);
  }
  // bytes: the range's length (16 elements, or offset/count's).
  rows.push_back(GetShm("ShmBytesDiffer", "in64", 60, kInvalid,
                        {"shared_memory.bytes 60 differs from the range's 64 bytes (16 elements of 4 bytes from offset 0)"}));
  rows.push_back(GetShm("ShmBytesZero", "in64", 0, kInvalid, {"shared_memory.bytes 0 differs from the range's 64 bytes"}));
  {
    Row row = GetShm("ShmBytesDifferFromCount", "in64", 64, kInvalid,
                     {"shared_memory.bytes 64 differs from the range's 8 bytes (2 elements of 4 bytes from offset 4)"});
    row.get.set_offset(4);
    row.get.set_count(2);
    rows.push_back(row);
    row = GetShm("ShmBytesForEmptyRange", "in64", 4, kInvalid,
                 {"shared_memory.bytes 4 differs from the range's 0 bytes (0 elements of 4 bytes from offset 16)"});
    row.get.set_offset(16);
    rows.push_back(row);
  }
  // The range is checked first, the memory it goes to after.
  {
    Row row = GetShm("ShmRangePastEnd", "nope", 64, kOutOfRange, {"offset 17 is past the array's end (16 elements)"});
    row.get.set_offset(17);
    rows.push_back(row);
  }
  // The region, as a Put's (the request's own fields: shared_memory.*, no header).
  rows.push_back(GetShm("ShmRegionMissing", "nope", 64, kNotFound,
                        {"shared_memory.region \"nope\"", "no such region under --shm-dir"}));
  rows.push_back(GetShm("ShmRegionUnset", "", 64, kInvalid, {"shared_memory.region \"\"", "a region is a plain file name"}));
  rows.push_back(GetShm("ShmRegionWithSlash", "dir/out64", 64, kInvalid, {"shared_memory.region \"dir/out64\"", "no '/'"}));
  rows.push_back(GetShm("ShmRegionParent", "../out64", 64, kInvalid, {"shared_memory.region \"../out64\"", "plain file name"}));
  rows.push_back(GetShm("ShmRegionDotDot", "..", 64, kInvalid, {"shared_memory.region \"..\"", "not '..'"}));
  rows.push_back(GetShm("ShmRegionIsASymlink", "link", 64, kInvalid, {"shared_memory.region \"link\"", "symbolic link"}));
  rows.push_back(GetShm("ShmRegionIsADirectory", "dir", 64, kInvalid, {"shared_memory.region \"dir\"", "not a regular file"}));
  rows.push_back(GetShm("ShmPastRegion", "small", 64, kOutOfRange,
                        {"shared_memory.region \"small\"", "region has 8 bytes, fewer than offset 0 + bytes 64"}));
  rows.push_back(GetShm("ShmOffsetPastRegion", "out64", 64, kOutOfRange,
                        {"shared_memory.region \"out64\"", "region has 64 bytes, fewer than offset 8 + bytes 64"}, 8));
  rows.push_back(GetShm("ShmOffsetNotWholeElements", "out64", 64, kInvalid,
                        {"shared_memory.region \"out64\"", "offset 2", "element size 4"}, 2));
  rows.push_back(GetShm("ShmOffsetPlusBytesOverflows", "out64", 64, kOutOfRange,
                        {"shared_memory.region \"out64\"", "offset + bytes overflows"}, ~uint64_t{3}));
  // Only the input fields: the range goes to region at offset; an operation's output fields
  // (a Scan's output_region, where a GetArray used to write instead) stay unset.
  {
    Row row = GetShm("ShmOutputRegion", "in64", 64, kInvalid,
                     {"shared_memory.output_region \"out64\": GetArray writes the range at shared_memory.region"});
    row.get.mutable_shared_memory()->set_output_region("out64");
    rows.push_back(row);
    row = GetShm("ShmOutputOffset", "out64", 64, kInvalid,
                 {"shared_memory.output_offset 8: GetArray writes the range at shared_memory.region"});
    row.get.mutable_shared_memory()->set_output_offset(8);
    rows.push_back(row);
    row = GetShm("ShmIndicesRegion", "out64", 64, kInvalid,
                 {"shared_memory.indices_region \"flags16\"", "only a Compact asking for indices"});
    row.get.mutable_shared_memory()->set_indices_region("flags16");
    rows.push_back(row);
    row = GetShm("ShmFlagsRegion", "out64", 64, kInvalid,
                 {"shared_memory.flags_region \"flags16\"", "only a Compact with use_flags reads flags"});
    row.get.mutable_shared_memory()->set_flags_region("flags16");
    rows.push_back(row);
  }
  // The id comes first: an unknown one, or another tenant's array, is NOT_FOUND whatever the memory.
  {
    Row row = GetShm("ShmOtherTenantsArray", "out64", 60, kNotFound, {"id ", "no such resident array"});
    row.metadata.emplace_back("gpuscan-tenant", std::string(7, 't'));
    rows.push_back(row);
    row = GetShm("ShmIdOfAnotherRun", "out64", 60, kNotFound, {"the server restarted"});
    row.foreign_id = false;
    row.get.set_id(std::string(24, '\x5a'));
    rows.push_back(row);
  }
}

void GetDeviceRows(std::vector<Row>& rows) {
  rows.push_back(GetDevice("DeviceMemoryNotServed", kPrecondition,
                           {"device_memory: this server does not open device memory", "--allow-device-ipc"}));
  rows.push_back(GetDevice("DeviceBytesDiffer", kInvalid,
                           {"device_memory.bytes 32 differs from the range's 64 bytes (16 elements of 4 bytes from offset 0)"},
                           32));
  {
    Row row = GetDevice("DeviceHandleShort", kInvalid, {"device_memory.handle has 63 bytes", "has 64"});
    row.get.mutable_device_memory()->set_handle(std::string(63, '\x11'));
    rows.push_back(row);
    row.name = "GetArray_DeviceHandleMissing";
    row.get.mutable_device_memory()->clear_handle();
    row.expect = {"device_memory.handle has 0 bytes"};
    rows.push_back(row);
  }
  {
    Row row = GetDevice("DeviceUuidShort", kInvalid, {"device_memory.device_uuid has 17 bytes; a device UUID has 16"});
    row.get.mutable_device_memory()->set_device_uuid(std::string(17, '\x5a'));
    rows.push_back(row);
    row.name = "GetArray_DeviceUuidMissing";
    row.get.mutable_device_memory()->clear_device_uuid();
    row.expect = {"device_memory.device_uuid has 0 bytes"};
    rows.push_back(row);
  }
  {
    Row row = GetDevice("DeviceOffsetNotWholeElements", kInvalid,
                        {"device_memory.offset 6 is not a multiple of the element size 4"});
    row.get.mutable_device_memory()->set_offset(6);
    rows.push_back(row);
    row = GetDevice("DeviceOutputHandle", kInvalid,
                    {"device_memory.output_handle (64 bytes): GetArray writes the range at device_memory.handle"});
    row.get.mutable_device_memory()->set_output_handle(kOtherHandle);
    rows.push_back(row);
    row = GetDevice("DeviceOutputOffset", kInvalid,
                    {"device_memory.output_offset 8: GetArray writes the range at device_memory.handle"});
    row.get.mutable_device_memory()->set_output_offset(8);
    rows.push_back(row);
    row = GetDevice("DeviceValuesHandle", kInvalid,
                    {"device_memory.values_handle (64 bytes)", "only a Sort with values"});
    row.get.mutable_device_memory()->set_values_handle(kOtherHandle);
    rows.push_back(row);
    row = GetDevice("DeviceKeysHandle", kInvalid, {"device_memory.keys_handle (64 bytes)", "only a SegmentedScan"});
    row.get.mutable_device_memory()->set_keys_handle(kOtherHandle);
    rows.push_back(row);
    row = GetDevice("DeviceIndicesHandle", kInvalid,
                    {"device_memory.indices_handle (64 bytes)", "only a Compact asking for indices"});
    row.get.mutable_device_memory()->set_indices_handle(kOtherHandle);
    rows.push_back(row);
  }
}

}  // namespace gpuscan::matrix::resident_memory_rows

namespace gpuscan::matrix {

void ResidentMemoryRows(std::vector<Row>& rows) {
  resident_memory_rows::PutSharedRows(rows);
  resident_memory_rows::PutDeviceRows(rows);
  resident_memory_rows::GetSharedRows(rows);
  resident_memory_rows::GetDeviceRows(rows);
}

}  // namespace gpuscan::matrix
