// The bad-input matrix: the transports a header can name (striped lanes, shared memory, device
// memory), on every RPC that takes them.
#include <cstdint>
#include <string>
#include <vector>

#include "invalid_input_matrix.h"

namespace gpuscan::matrix {

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

}  // namespace gpuscan::matrix
