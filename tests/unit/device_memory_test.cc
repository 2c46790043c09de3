// Device memory's checks and the cache of opened handles (service/device_memory.h), without a
// GPU: an engine whose OpenIpc hands out host buffers stands in for the CUDA one, so the range
// rules, the device check, the reuse of opened handles and the idle sweep run here. The calls on
// real CUDA IPC handles run on the GPU machine (python/tests/test_device_ipc_*.py).
#include "service/device_memory.h"

#include <atomic>
#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "engine/cpu_engine.h"

namespace gpuscan::server {
namespace {

using ::testing::HasSubstr;

const std::string kFakeUuid(16, '\x5a');

std::string IpcHandleOf(char c) { return std::string(64, c); }

// Each handle byte names an allocation of `bytes` host bytes; opens and closes are counted.
class FakeIpcEngine final : public engine::CpuEngine {
 public:
  explicit FakeIpcEngine(uint64_t bytes) : CpuEngine(1), bytes_(bytes) {}

  std::vector<engine::DeviceInfo> devices() const override {
    engine::DeviceInfo d;
    d.name = "fake";
    d.uuid = kFakeUuid;
    return {d};
  }
  std::shared_ptr<engine::IpcMemory> OpenIpc(const std::string& uuid, const std::string& handle) override {
    if (uuid != kFakeUuid) throw engine::Error(engine::ErrorCode::kFailedPrecondition, "not this device");
    if (handle[0] == 'x') throw engine::Error(engine::ErrorCode::kFailedPrecondition, "the driver cannot open it");
    // As cudaErrorAlreadyMapped: a new allocation in the range of a freed one still open here.
    if (handle[0] == 'm' && opens > closes) throw engine::Error(engine::ErrorCode::kFailedPrecondition, "already mapped");
    ++opens;
    auto& buffer = buffers_[handle[0]];
    if (buffer.empty()) buffer.resize(bytes_);
    return std::shared_ptr<engine::IpcMemory>(new engine::IpcMemory{buffer.data(), bytes_, this, {}},
                                              [this](engine::IpcMemory* m) {
                                                ++closes;
                                                delete m;
                                              });
  }
  std::atomic<int> opens{0}, closes{0};

 private:
  uint64_t bytes_;
  std::map<char, std::vector<std::byte>> buffers_;
};

v1::DeviceMemory DeviceHeader(char handle, uint64_t offset, uint64_t bytes) {
  v1::DeviceMemory h;
  h.set_device_uuid(kFakeUuid);
  h.set_handle(IpcHandleOf(handle));
  h.set_offset(offset);
  h.set_bytes(bytes);
  return h;
}

SharedNeeds ScanOutputNeeds() {
  SharedNeeds n;
  n.scan_output = true;
  return n;
}

TEST(DeviceMemoryTest, OnlyLocalPeersAreServed) {
  for (const char* peer : {"unix:/tmp/s.sock", "unix-abstract:gpuscan", "ipv4:127.0.0.1:5000", "ipv6:[::1]:5000",
                           "ipv6:%5B::1%5D:5000", "ipv6:[::ffff:127.0.0.1]:5000"}) {
    EXPECT_TRUE(LocalPeer(peer)) << peer;
  }
  for (const char* peer : {"ipv4:10.0.0.7:5000", "ipv6:[fe80::1]:5000", "ipv4:128.0.0.1:1", ""}) {
    EXPECT_FALSE(LocalPeer(peer)) << peer;
  }
  FakeIpcEngine engine(4096);
  IpcHandles handles(&engine, true);
  DeviceRanges r;
  const grpc::Status s = OpenDevice(handles, "ipv4:10.0.0.7:5000", DeviceHeader('a', 0, 64), false, 4, ScanOutputNeeds(), {}, &r);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(s.error_message(), HasSubstr("10.0.0.7"));
}

TEST(DeviceMemoryTest, RangesLieInsideTheirAllocations) {
  FakeIpcEngine engine(4096);
  IpcHandles handles(&engine, true);
  const std::string peer = "unix:/tmp/s";
  DeviceRanges r;
  ASSERT_TRUE(OpenDevice(handles, peer, DeviceHeader('a', 4096 - 64, 64), false, 4, ScanOutputNeeds(), {}, &r).ok());
  EXPECT_EQ(r.elements, 16u);
  EXPECT_EQ(r.out, r.in);  // in place
  EXPECT_EQ(r.engine, &engine);
  for (auto [offset, bytes] : {std::pair<uint64_t, uint64_t>{4096 - 60, 64}, {4100, 0}, {0, 4100}, {8, ~uint64_t{0} - 7}}) {
    DeviceRanges bad;
    const grpc::Status s = OpenDevice(handles, peer, DeviceHeader('a', offset, bytes), false, 4, ScanOutputNeeds(), {}, &bad);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::OUT_OF_RANGE) << offset << " " << bytes << ": " << s.error_message();
    EXPECT_THAT(s.error_message(), HasSubstr("4096-byte allocation of header.device_memory.handle"));
  }
  // The output's range too, named by its field.
  v1::DeviceMemory h = DeviceHeader('a', 0, 64);
  h.set_output_handle(IpcHandleOf('b'));
  h.set_output_offset(4096 - 32);
  DeviceRanges bad;
  const grpc::Status s = OpenDevice(handles, peer, h, false, 4, ScanOutputNeeds(), {}, &bad);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::OUT_OF_RANGE);
  EXPECT_THAT(s.error_message(), HasSubstr("header.device_memory.output_offset 4064"));
}

TEST(DeviceMemoryTest, OutputsMayNotOverlapOtherRanges) {
  FakeIpcEngine engine(4096);
  IpcHandles handles(&engine, true);
  const std::string peer = "unix:/tmp/s";
  // A scan into its own range by name is in place; overlapping it elsewhere is refused.
  v1::DeviceMemory h = DeviceHeader('a', 0, 64);
  h.set_output_handle(IpcHandleOf('a'));
  DeviceRanges same;
  ASSERT_TRUE(OpenDevice(handles, peer, h, false, 4, ScanOutputNeeds(), {}, &same).ok());
  EXPECT_EQ(same.out, same.in);
  h.set_output_offset(32);
  DeviceRanges overlap;
  grpc::Status s = OpenDevice(handles, peer, h, false, 4, ScanOutputNeeds(), {}, &overlap);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("output_handle overlaps header.device_memory.handle"));
  // Compact: kept values beside the input, indices overlapping the flags.
  SharedNeeds compact;
  compact.values_output = compact.indices_output = compact.flags_input = true;
  v1::DeviceMemory c = DeviceHeader('a', 0, 64);
  c.set_output_handle(IpcHandleOf('a'));
  c.set_output_offset(64);
  c.set_flags_handle(IpcHandleOf('b'));
  c.set_indices_handle(IpcHandleOf('b'));
  c.set_indices_offset(8);
  DeviceRanges k;
  s = OpenDevice(handles, peer, c, false, 4, compact, {}, &k);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("indices_handle overlaps header.device_memory.flags_handle"));
  c.set_indices_offset(1024);
  DeviceRanges ok;
  ASSERT_TRUE(OpenDevice(handles, peer, c, false, 4, compact, {}, &ok).ok());
  EXPECT_EQ(ok.out, ok.in + 64);
  EXPECT_EQ(reinterpret_cast<std::byte*>(ok.indices), reinterpret_cast<std::byte*>(ok.flags) + 1024);
}

TEST(DeviceMemoryTest, AnotherDeviceOrABadHandleIsRefusedAndServingGoesOn) {
  FakeIpcEngine engine(4096);
  IpcHandles handles(&engine, true);
  const std::string peer = "unix:/tmp/s";
  v1::DeviceMemory h = DeviceHeader('a', 0, 64);
  h.set_device_uuid(std::string(16, '\x01'));
  DeviceRanges r;
  grpc::Status s = OpenDevice(handles, peer, h, false, 4, ScanOutputNeeds(), {}, &r);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(s.error_message(), HasSubstr("device_uuid 01010101010101010101010101010101 is not a device"));
  EXPECT_THAT(s.error_message(), HasSubstr("fake 5a5a"));
  s = OpenDevice(handles, peer, DeviceHeader('x', 0, 64), false, 4, ScanOutputNeeds(), {}, &r);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(s.error_message(), HasSubstr("header.device_memory.handle: the driver cannot open it"));
  EXPECT_EQ(handles.open_handles(), 0u);
  ASSERT_TRUE(OpenDevice(handles, peer, DeviceHeader('a', 0, 64), false, 4, ScanOutputNeeds(), {}, &r).ok());
}

TEST(DeviceMemoryTest, AHandleIsOpenedOnceAndClosedWhenIdle) {
  FakeIpcEngine engine(4096);
  IpcHandles handles(&engine, true, std::chrono::milliseconds(200));
  const std::string peer = "unix:/tmp/s";
  {
    DeviceRanges first, second;
    ASSERT_TRUE(OpenDevice(handles, peer, DeviceHeader('a', 0, 64), false, 4, ScanOutputNeeds(), {}, &first).ok());
    ASSERT_TRUE(OpenDevice(handles, peer, DeviceHeader('a', 64, 64), false, 4, ScanOutputNeeds(), {}, &second).ok());
    EXPECT_EQ(engine.opens, 1);
    EXPECT_EQ(second.in, first.in + 64);
    // Held by a call: not closed however long it runs.
    std::this_thread::sleep_for(std::chrono::milliseconds(600));
    EXPECT_EQ(engine.closes, 0);
    EXPECT_EQ(handles.open_handles(), 1u);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (engine.closes == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(engine.closes, 1);
  EXPECT_EQ(handles.open_handles(), 0u);
  DeviceRanges again;
  ASSERT_TRUE(OpenDevice(handles, peer, DeviceHeader('a', 0, 64), false, 4, ScanOutputNeeds(), {}, &again).ok());
  EXPECT_EQ(engine.opens, 2);
}

TEST(DeviceMemoryTest, AHandleRefusedWhileOthersAreOpenIsTriedAgainWithTheIdleOnesClosed) {
  FakeIpcEngine engine(4096);
  IpcHandles handles(&engine, true, std::chrono::seconds(60));
  const std::string peer = "unix:/tmp/s";
  {
    DeviceRanges held;
    ASSERT_TRUE(OpenDevice(handles, peer, DeviceHeader('a', 0, 64), false, 4, ScanOutputNeeds(), {}, &held).ok());
    DeviceRanges r;
    const grpc::Status s = OpenDevice(handles, peer, DeviceHeader('m', 0, 64), false, 4, ScanOutputNeeds(), {}, &r);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);  // 'a' is in use: not closed
    EXPECT_THAT(s.error_message(), HasSubstr("already mapped"));
    EXPECT_EQ(engine.closes, 0);
  }
  DeviceRanges r;
  ASSERT_TRUE(OpenDevice(handles, peer, DeviceHeader('m', 0, 64), false, 4, ScanOutputNeeds(), {}, &r).ok());
  EXPECT_EQ(engine.closes, 1);
  EXPECT_EQ(handles.open_handles(), 1u);
}

TEST(DeviceMemoryTest, ASortsRangesFollowItsOutput) {
  FakeIpcEngine engine(4096);
  IpcHandles handles(&engine, true);
  const std::string peer = "unix:/tmp/s";
  SortNeeds needs;  // int32 keys to keys, with int64 values and the permutation
  needs.indices_output = true;
  needs.value_size = 8;
  v1::DeviceMemory h = DeviceHeader('a', 0, 64);  // 16 keys
  h.set_output_handle(IpcHandleOf('a'));           // in place
  h.set_indices_handle(IpcHandleOf('b'));
  h.set_values_handle(IpcHandleOf('c'));
  h.set_values_output_handle(IpcHandleOf('c'));
  h.set_values_output_offset(128);
  DeviceRanges r;
  ASSERT_TRUE(OpenDeviceSort(handles, peer, h, needs, {}, &r).ok());
  EXPECT_EQ(r.out, r.in);
  EXPECT_EQ(r.values_output, r.values + 128);
  // The values' output over the values' second half: refused.
  h.set_values_output_offset(64);
  DeviceRanges overlap;
  grpc::Status s = OpenDeviceSort(handles, peer, h, needs, {}, &overlap);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("values_output_handle overlaps header.device_memory.values_handle"));
  // 16 values of 8 bytes past the allocation's end.
  h.set_values_output_offset(4096 - 64);
  DeviceRanges past;
  s = OpenDeviceSort(handles, peer, h, needs, {}, &past);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::OUT_OF_RANGE);
  EXPECT_THAT(s.error_message(), HasSubstr("header.device_memory.values_output_offset 4032 + 128 bytes"));
  // Indices asked for and not given.
  h.set_values_output_offset(128);
  h.clear_indices_handle();
  DeviceRanges missing;
  s = OpenDeviceSort(handles, peer, h, needs, {}, &missing);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("indices_handle: required for the permutation"));
}

TEST(DeviceMemoryTest, ASegmentedScansKeysAreAnInputRange) {
  FakeIpcEngine engine(4096);
  IpcHandles handles(&engine, true);
  const std::string peer = "unix:/tmp/s";
  SharedNeeds needs = ScanOutputNeeds();
  needs.key_bytes = 8;
  v1::DeviceMemory h = DeviceHeader('a', 0, 64);  // 16 int32 values, in place
  DeviceRanges r;
  grpc::Status s = OpenDevice(handles, peer, h, false, 4, needs, {}, &r);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("keys_handle: required for the segment keys"));
  h.set_keys_handle(IpcHandleOf('b'));
  h.set_keys_offset(4096 - 128);
  ASSERT_TRUE(OpenDevice(handles, peer, h, false, 4, needs, {}, &r).ok());
  EXPECT_EQ(r.out, r.in);
  ASSERT_NE(r.keys, nullptr);
  // The output over the keys: refused; keys past the end: OUT_OF_RANGE.
  h.set_output_handle(IpcHandleOf('b'));
  h.set_output_offset(4096 - 64);
  DeviceRanges overlap;
  s = OpenDevice(handles, peer, h, false, 4, needs, {}, &overlap);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("output_handle overlaps header.device_memory.keys_handle"));
  h.clear_output_handle();
  h.set_output_offset(0);
  h.set_keys_offset(4096 - 120);
  DeviceRanges past;
  s = OpenDevice(handles, peer, h, false, 4, needs, {}, &past);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::OUT_OF_RANGE);
  EXPECT_THAT(s.error_message(), HasSubstr("header.device_memory.keys_offset 3976"));
  // Keys on a plain scan: refused.
  DeviceRanges plain;
  s = OpenDevice(handles, peer, h, false, 4, ScanOutputNeeds(), {}, &plain);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("only a SegmentedScan reads keys"));
}

TEST(DeviceMemoryTest, OffWithoutTheFlag) {
  FakeIpcEngine engine(4096);
  IpcHandles handles(&engine, false);
  DeviceRanges r;
  const grpc::Status s = OpenDevice(handles, "unix:/tmp/s", DeviceHeader('a', 0, 64), false, 4, ScanOutputNeeds(), {}, &r);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(s.error_message(), HasSubstr("--allow-device-ipc"));
  EXPECT_EQ(engine.opens, 0);
}

}  // namespace
}  // namespace gpuscan::server
