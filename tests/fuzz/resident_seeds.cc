// The seeds of the resident-array calls (request_fuzz_replay --write-seeds writes them after the
// others: the earlier seeds' bytes stay as they were).
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "seed_builders.h"

namespace gpuscan::fuzz::seeds {
namespace {

v1::PutArrayHeader PutH(v1::DType d, std::optional<uint64_t> count = std::nullopt, uint64_t ttl_ms = 0) {
  v1::PutArrayHeader h;
  h.set_dtype(d);
  if (count) h.set_element_count(*count);
  h.set_ttl_ms(ttl_ms);
  h.set_label("seed");
  return h;
}
// GetArray's request; an id of one byte (or none) names an array the fuzzer puts from the data.
v1::GetArrayRequest GetR(const std::string& id, uint64_t offset, std::optional<uint64_t> count, uint64_t chunk_bytes = 0) {
  v1::GetArrayRequest r;
  r.set_id(id);
  r.set_offset(offset);
  if (count) r.set_count(*count);
  r.set_chunk_bytes(chunk_bytes);
  return r;
}
v1::DropArrayRequest DropR(const std::string& id) {
  v1::DropArrayRequest r;
  r.set_id(id);
  return r;
}
template <class H>
H WithResidentH(H h, const std::string& values, bool keep = false) {
  h.mutable_resident()->set_values(values);
  h.mutable_resident()->set_keep(keep);
  return h;
}

// The seeds of the resident calls (WriteSeeds' last: the earlier seeds' bytes stay as they were).
void WriteResidentOpSeeds(const std::function<void(const std::string&, int, uint8_t, const std::vector<SeedRequest>&)>& put);
void WriteResidentMemorySeeds(const std::function<void(const std::string&, int, uint8_t, const std::vector<SeedRequest>&)>& put);

}  // namespace

void WriteResidentSeeds(const std::function<void(const std::string&, int, uint8_t, const std::vector<SeedRequest>&)>& put) {
  const std::string other_run(24, '\x5a');
  put("accept_put_array_int32_declared", kPutArray, kChunk256,
      {Head(PutH(v1::DTYPE_INT32, 100), NonZero(256, 4)), Chunk(NonZero(144, 4))});
  put("accept_put_array_float16_undeclared", kPutArray, kChunk64,
      {Head(PutH(v1::DTYPE_FLOAT16, std::nullopt, 5000)), Chunk(NonZero(64, 2)), Chunk(""), Chunk(NonZero(6, 2))});
  put("reject_put_array_past_budget", kPutArray, kChunk1K | kBudget512, {Head(PutH(v1::DTYPE_UINT8)), Chunk(NonZero(1024))});
  put("reject_put_array_past_tenant_quota", kPutArray, kChunk1K | kQuota64,
      {Head(PutH(v1::DTYPE_INT64, 16)), Chunk(NonZero(128, 8))});
  put("reject_put_array_not_served", kPutArray, kChunk256 | kNotServed, {Head(PutH(v1::DTYPE_INT32), NonZero(16, 4))});
  put("reject_put_array_count_larger", kPutArray, kChunk256, {Head(PutH(v1::DTYPE_INT32, 10), NonZero(8, 4))});
  put("reject_put_array_unknown_dtype", kPutArray, kChunk256,
      {Head(PutH(static_cast<v1::DType>(99)), NonZero(8, 4))});
  put("reject_put_array_partial_element", kPutArray, kChunk256, {Head(PutH(v1::DTYPE_FLOAT64)), Chunk(NonZero(12))});
  put("accept_get_array_range", kGetArray, kChunk64, {Head(GetR("\x05", 3, 20, 24), NonZero(256, 8))});
  put("accept_get_array_whole", kGetArray, kChunk64, {Head(GetR("", 0, std::nullopt), NonZero(100, 4))});
  put("reject_get_array_offset_past_end", kGetArray, kChunk64, {Head(GetR(std::string(1, '\0'), 5, std::nullopt), NonZero(16, 4))});
  put("reject_get_array_count_past_end", kGetArray, kChunk64, {Head(GetR("", 1, 4), NonZero(16, 4))});
  put("reject_get_array_other_run", kGetArray, kChunk64, {Head(GetR(other_run, 0, std::nullopt))});
  put("accept_drop_array", kDropArray, kChunk256, {Head(DropR(""), NonZero(40, 4))});
  put("reject_drop_array_other_run", kDropArray, kChunk256, {Head(DropR(other_run))});
  {
    SeedRequest first = Chunk(NonZero(64, 8));
    first.has_header = true;
    first.header = "\x04";  // ListArrays: the array's dtype (FLOAT32)
    put("accept_list_arrays", kListArrays, kChunk256, {first, Chunk(NonZero(10)), Chunk("")});
  }
  put("reject_list_arrays_not_served", kListArrays, kChunk256 | kNotServed, {Chunk(NonZero(10))});
  put("accept_scan_resident_int32_sum", kScanResident, kChunk256,
      {Head(WithResidentH(ScanH(v1::DTYPE_INT32, v1::OPERATOR_SUM), ""), NonZero(400, 4))});
  {
    v1::ScanHeader h = WithResidentH(ScanH(v1::DTYPE_FLOAT32, v1::OPERATOR_SUM, true), "", true);
    h.mutable_resident()->set_label("kept");
    put("accept_scan_resident_float32_keep", kScanResident, kChunk256, {Head(h, NonZero(200, 4))});
  }
  put("accept_reduce_resident_float64_sum", kReduceResident, kChunk256,
      {Head(WithResidentH(ReduceH(v1::DTYPE_FLOAT64, v1::OPERATOR_SUM), ""), NonZero(256, 8))});
  put("accept_reduce_resident_uint64_bitxor", kReduceResident, kChunk256,
      {Head(WithResidentH(ReduceH(v1::DTYPE_UINT64, v1::OPERATOR_BIT_XOR), ""), NonZero(64, 8))});
  put("reject_scan_resident_dtype_differs", kScanResident, kChunk256,
      {Head(WithResidentH(ScanH(v1::DTYPE_INT64, v1::OPERATOR_MAX), std::string(1, '\0')), NonZero(64, 4))});
  put("reject_scan_resident_with_data", kScanResident, kChunk256,
      {Head(WithResidentH(ScanH(v1::DTYPE_INT32, v1::OPERATOR_SUM), ""), NonZero(16, 4)), Chunk(NonZero(16, 4))});
  put("reject_reduce_resident_keep", kReduceResident, kChunk256,
      {Head(WithResidentH(ReduceH(v1::DTYPE_INT32, v1::OPERATOR_SUM), "", true), NonZero(16, 4))});
  put("reject_scan_resident_other_run", kScanResident, kChunk256,
      {Head(WithResidentH(ScanH(v1::DTYPE_INT32, v1::OPERATOR_SUM), other_run))});
  put("accept_scan_resident_narrow", kScanResident, kChunk256,
      {Head(WithResidentH(ScanH(v1::DTYPE_INT8, v1::OPERATOR_SUM), ""), NonZero(16))});
  {
    v1::ReduceHeader h = WithResidentH(ReduceH(v1::DTYPE_INT32, v1::OPERATOR_MIN), "");
    h.set_element_count(5);
    put("reject_reduce_resident_count_differs", kReduceResident, kChunk256, {Head(h, NonZero(16, 4))});
  }
  put("reject_scan_resident_not_served", kScanResident, kChunk256 | kNotServed,
      {Head(WithResidentH(ScanH(v1::DTYPE_INT32, v1::OPERATOR_SUM), ""), NonZero(16, 4))});
  WriteResidentOpSeeds(put);
  WriteResidentMemorySeeds(put);
}

// PutArrayHeader's and GetArrayRequest's shared_memory and device_memory: the fuzzer's server
// has neither (no --shm-dir, no --allow-device-ipc), so each is refused, by the fields' own
// checks (request_fuzz_resident.cc: OpenShared / OpenDevice, CheckGetArrayMemory) or, well
// formed, as memory that is off. A seed per field, and the ways each can be wrong on its own.
namespace {
v1::SharedMemory Shm(uint64_t bytes, uint64_t offset = 0) {
  v1::SharedMemory m;
  m.set_region("seed-region");
  m.set_offset(offset);
  m.set_bytes(bytes);
  return m;
}
v1::DeviceMemory Dev(uint64_t bytes, size_t handle_bytes = 64, size_t uuid_bytes = 16) {
  v1::DeviceMemory m;
  m.set_device_uuid(std::string(uuid_bytes, '\x5a'));
  m.set_handle(std::string(handle_bytes, '\x11'));
  m.set_bytes(bytes);
  return m;
}
void WriteResidentMemorySeeds(const std::function<void(const std::string&, int, uint8_t, const std::vector<SeedRequest>&)>& put) {
  {
    v1::PutArrayHeader h = PutH(v1::DTYPE_INT32);
    *h.mutable_shared_memory() = Shm(64);
    put("reject_put_array_shared_memory", kPutArray, kChunk256, {Head(h)});
    put("reject_put_array_shared_memory_with_data", kPutArray, kChunk256, {Head(h), Chunk(NonZero(64, 4))});
    h.set_element_count(5);
    put("reject_put_array_shared_memory_count_differs", kPutArray, kChunk256, {Head(h)});
    h = PutH(v1::DTYPE_INT64);
    *h.mutable_shared_memory() = Shm(12);
    put("reject_put_array_shared_memory_partial_element", kPutArray, kChunk256, {Head(h)});
    h = PutH(v1::DTYPE_INT32);
    *h.mutable_shared_memory() = Shm(64);
    h.mutable_shared_memory()->set_output_region("seed-out");
    put("reject_put_array_shared_memory_output_region", kPutArray, kChunk256, {Head(h)});
  }
  {
    v1::PutArrayHeader h = PutH(v1::DTYPE_FLOAT32);
    *h.mutable_device_memory() = Dev(64);
    put("reject_put_array_device_memory", kPutArray, kChunk256, {Head(h)});
    *h.mutable_shared_memory() = Shm(64);
    put("reject_put_array_both_memories", kPutArray, kChunk256, {Head(h)});
    h = PutH(v1::DTYPE_FLOAT32);
    *h.mutable_device_memory() = Dev(64, 63);
    put("reject_put_array_device_memory_handle_short", kPutArray, kChunk256, {Head(h)});
  }
  {
    v1::GetArrayRequest r = GetR("", 0, std::nullopt);
    *r.mutable_shared_memory() = Shm(64);
    put("reject_get_array_shared_memory", kGetArray, kChunk64, {Head(r, NonZero(64, 4))});
    r.mutable_shared_memory()->set_bytes(60);
    put("reject_get_array_shared_memory_bytes_differ", kGetArray, kChunk64, {Head(r, NonZero(64, 4))});
    r.mutable_shared_memory()->set_bytes(64);
    r.mutable_shared_memory()->set_output_region("seed-out");
    put("reject_get_array_shared_memory_output_region", kGetArray, kChunk64, {Head(r, NonZero(64, 4))});
    r = GetR("", 2, 4);
    *r.mutable_device_memory() = Dev(16);
    put("reject_get_array_device_memory", kGetArray, kChunk64, {Head(r, NonZero(64, 4))});
    *r.mutable_shared_memory() = Shm(16);
    put("reject_get_array_both_memories", kGetArray, kChunk64, {Head(r, NonZero(64, 4))});
    r = GetR("", 0, std::nullopt);
    *r.mutable_device_memory() = Dev(64, 64, 15);
    put("reject_get_array_device_memory_uuid_short", kGetArray, kChunk64, {Head(r, NonZero(64, 4))});
  }
}
}  // namespace

// The operations of several inputs on resident arrays: an empty id of an input the header asks
// for, or a one-byte id (its dtype), names an array put from request #0 (values: data; flags,
// keys, sort values: the second stream).
namespace {
void WriteResidentOpSeeds(const std::function<void(const std::string&, int, uint8_t, const std::vector<SeedRequest>&)>& put) {
  const std::string int32(1, char(v1::DTYPE_INT32 - 1)), uint8(1, char(v1::DTYPE_UINT8 - 1));
  put("accept_compact_resident_flags_keep", kCompactResident, kChunk256,
      {Head(WithResidentH(FlagsH(v1::DTYPE_FLOAT32, v1::COMPACT_OUTPUT_VALUES_AND_INDICES), "", true), NonZero(400, 4),
            Flags(100))});
  {
    v1::CompactHeader h = WithResidentH(FlagsH(v1::DTYPE_INT32), "");
    h.mutable_resident()->set_flags(int32);  // flags must be one byte an element
    put("reject_compact_resident_flags_int32", kCompactResident, kChunk256, {Head(h, NonZero(64, 4), NonZero(64, 4))});
  }
  put("reject_compact_resident_flags_short", kCompactResident, kChunk256,
      {Head(WithResidentH(FlagsH(v1::DTYPE_INT64), ""), NonZero(80, 8), Flags(9))});
  put("accept_histogram_resident_even", kHistogramResident, kChunk256,
      {Head(WithResidentH(EvenH(v1::DTYPE_FLOAT64, 16, -1, 1), ""), NonZero(256, 8))});
  put("reject_histogram_resident_keep", kHistogramResident, kChunk256,
      {Head(WithResidentH(EdgesH(v1::DTYPE_INT32, {-5, 0, 5}), "", true), NonZero(64, 4))});
  put("accept_scan2d_resident_rows_keep", kScan2DResident, kChunk256,
      {Head(WithResidentH(Scan2DH(v1::DTYPE_INT64, v1::OPERATOR_SUM, 7), "", true), NonZero(7 * 6 * 8, 8))});
  put("accept_segmented_scan_resident_keys", kSegmentedScanResident, kChunk256,
      {Head(WithResidentH(SegKeysH(v1::DTYPE_FLOAT32, v1::OPERATOR_SUM, v1::DTYPE_UINT32), ""), NonZero(300, 4),
            RunKeys(75, 4, 6))});
  put("accept_segmented_scan_resident_heads_keep", kSegmentedScanResident, kChunk256,
      {Head(WithResidentH(SegHeadsH(v1::DTYPE_UINT64, v1::OPERATOR_MAX, true), "", true), NonZero(160, 8), Flags(20))});
  {
    v1::SegmentedScanHeader h = WithResidentH(SegHeadsH(v1::DTYPE_INT32, v1::OPERATOR_SUM), "");
    h.mutable_resident()->set_keys(uint8);  // heads take flags, not keys
    put("reject_segmented_scan_resident_keys_for_heads", kSegmentedScanResident, kChunk256,
        {Head(h, NonZero(64, 4), Flags(16))});
  }
  put("accept_reduce_by_key_resident_keep", kReduceByKeyResident, kChunk256,
      {Head(WithResidentH(ByKeyH(v1::DTYPE_FLOAT64, v1::OPERATOR_SUM, v1::DTYPE_INT64), "", true), NonZero(320, 8),
            RunKeys(40, 8, 4))});
  {
    v1::ReduceByKeyHeader h = WithResidentH(ByKeyH(v1::DTYPE_INT32, v1::OPERATOR_MIN, v1::DTYPE_INT64), "");
    h.mutable_resident()->set_keys(int32);  // key_dtype says INT64
    put("reject_reduce_by_key_resident_keys_dtype", kReduceByKeyResident, kChunk256,
        {Head(h, NonZero(64, 4), RunKeys(16, 4, 3))});
  }
  put("accept_sort_resident_keys_and_values_keep", kSortResident, kChunk256,
      {Head(WithResidentH(SortH(v1::DTYPE_FLOAT32, v1::SORT_OUTPUT_KEYS_AND_VALUES, true, v1::DTYPE_UINT64), "", true),
            NonZero(200, 4), NonZero(400, 8))});
  {
    v1::SortHeader h = WithResidentH(SortH(v1::DTYPE_INT32, v1::SORT_OUTPUT_KEYS_AND_VALUES, false, v1::DTYPE_INT32), "");
    h.mutable_resident()->set_sort_values(std::string(24, '\x11'));  // an id of no array
    put("reject_sort_resident_values_unknown", kSortResident, kChunk256, {Head(h, NonZero(64, 4))});
  }
}
}  // namespace

}  // namespace gpuscan::fuzz::seeds
