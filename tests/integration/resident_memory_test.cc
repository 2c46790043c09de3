// PutArray from, and GetArray into, the caller's shared memory (header.shared_memory /
// request.shared_memory): the array copied in one piece instead of streamed, bit for bit, at
// sizes around the engines' sub-chunks and at offsets into the regions; the refusals that name
// the field. (Device memory takes the same path with an IPC handle: the cuda suites.)
#include <unistd.h>

#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "gpuscan/shared_region.h"
#include "resident_fixture.h"

// A namespace of its own: the unity build puts this file beside others with helpers of these names.
namespace gpuscan::testing::resident_memory_tests {
namespace {

using namespace resident;  // NOLINT: the fixture's helpers

class ResidentSharedMemoryTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    char pattern[] = "/tmp/gpuscan-shm-res-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = new std::string(pattern);
    server::ServerOptions o = ResidentOptions();
    o.shm_dir = *dir_;
    server_ = new TestServer(o);
  }
  static void TearDownTestSuite() {
    delete server_;
    rmdir(dir_->c_str());  // every region deleted itself
    delete dir_;
  }

  // A Put of the region's [offset, offset + bytes) as `dtype`.
  grpc::Status PutShared(const SharedRegion& r, uint64_t offset, uint64_t bytes, v1::DType dtype, v1::ArrayInfo* info,
                         const std::string& inline_data = "") {
    grpc::ClientContext ctx;
    auto writer = stub_->PutArray(&ctx, info);
    v1::PutArrayRequest req;
    req.mutable_header()->set_dtype(dtype);
    v1::SharedMemory* shm = req.mutable_header()->mutable_shared_memory();
    shm->set_region(r.name());
    shm->set_offset(offset);
    shm->set_bytes(bytes);
    req.set_data(inline_data);
    writer->Write(req);
    writer->WritesDone();
    return writer->Finish();
  }

  grpc::Status GetShared(const std::string& id, const SharedRegion& r, uint64_t offset, uint64_t bytes,
                         uint64_t first = 0, std::optional<uint64_t> count = std::nullopt,
                         std::vector<v1::GetArrayResponse>* responses = nullptr) {
    grpc::ClientContext ctx;
    v1::GetArrayRequest req;
    req.set_id(id);
    req.set_offset(first);
    if (count) req.set_count(*count);
    v1::SharedMemory* shm = req.mutable_shared_memory();
    shm->set_region(r.name());
    shm->set_offset(offset);
    shm->set_bytes(bytes);
    auto reader = stub_->GetArray(&ctx, req);
    v1::GetArrayResponse resp;
    while (reader->Read(&resp)) {
      if (responses) responses->push_back(resp);
    }
    return reader->Finish();
  }

  static std::string* dir_;
  static TestServer* server_;
  std::unique_ptr<v1::GpuScan::Stub> stub_ = server_->stub();
};
std::string* ResidentSharedMemoryTest::dir_ = nullptr;
TestServer* ResidentSharedMemoryTest::server_ = nullptr;

TEST_F(ResidentSharedMemoryTest, PutFromAndGetIntoRegionsBitForBit) {
  uint32_t seed = 40;
  for (v1::DType dtype : {v1::DTYPE_INT32, v1::DTYPE_FLOAT64}) {
    const size_t size = SizeOf(dtype);
    for (uint64_t n : {uint64_t{0}, uint64_t{1}, uint64_t{1000}, (uint64_t{2} << 20) / size - 1,
                       (uint64_t{2} << 20) / size + 3}) {
      SCOPED_TRACE(v1::DType_Name(dtype) + " n=" + std::to_string(n));
      const std::string data = RandomArray(dtype, n, seed++);
      const uint64_t at = 3 * size;  // an offset into the region
      SharedRegion in = SharedRegion::Create(*dir_, at + data.size() + size);
      std::memcpy(in.as<char>() + at, data.data(), data.size());
      v1::ArrayInfo info;
      ASSERT_TRUE(PutShared(in, at, data.size(), dtype, &info).ok());
      EXPECT_EQ(info.element_count(), n);
      std::string streamed;
      ASSERT_TRUE(Get(*stub_, info.id(), &streamed).ok());
      EXPECT_TRUE(streamed == data) << "the Put from shared memory differs";

      SharedRegion out = SharedRegion::Create(*dir_, at + data.size() + 1);
      std::vector<v1::GetArrayResponse> responses;
      ASSERT_TRUE(GetShared(info.id(), out, at, data.size(), 0, std::nullopt, &responses).ok());
      EXPECT_EQ(std::memcmp(out.as<char>() + at, data.data(), data.size()), 0);
      ASSERT_EQ(responses.size(), 1u);
      EXPECT_TRUE(responses[0].data().empty());
      EXPECT_EQ(responses[0].info().id(), info.id());
      if (n > 10) {  // a range of it, at the region's start
        std::memset(out.data(), 0, out.bytes());
        ASSERT_TRUE(GetShared(info.id(), out, 0, 7 * size, 3, 7).ok());
        EXPECT_EQ(std::memcmp(out.data(), data.data() + 3 * size, 7 * size), 0);
      }
      grpc::ClientContext ctx;
      v1::DropArrayRequest drop;
      drop.set_id(info.id());
      v1::DropArrayResponse dropped;
      ASSERT_TRUE(stub_->DropArray(&ctx, drop, &dropped).ok());
    }
  }
}

TEST_F(ResidentSharedMemoryTest, RefusalsNameTheField) {
  SharedRegion r = SharedRegion::Create(*dir_, 4096);
  v1::ArrayInfo info;
  ExpectRefused(PutShared(r, 0, 4096, v1::DTYPE_INT32, &info, "abcd"), grpc::StatusCode::INVALID_ARGUMENT,
                {"data", "header.shared_memory"});
  ExpectRefused(PutShared(r, 0, 4098, v1::DTYPE_INT32, &info), grpc::StatusCode::INVALID_ARGUMENT,
                {"header.shared_memory", "bytes 4098"});
  ExpectRefused(PutShared(r, 0, 8192, v1::DTYPE_INT32, &info), grpc::StatusCode::OUT_OF_RANGE,
                {"header.shared_memory"});
  {
    grpc::ClientContext ctx;
    auto writer = stub_->PutArray(&ctx, &info);
    v1::PutArrayRequest req;
    req.mutable_header()->set_dtype(v1::DTYPE_INT32);
    req.mutable_header()->set_element_count(5);
    req.mutable_header()->mutable_shared_memory()->set_region(r.name());
    req.mutable_header()->mutable_shared_memory()->set_bytes(4096);
    writer->Write(req);
    writer->WritesDone();
    ExpectRefused(writer->Finish(), grpc::StatusCode::INVALID_ARGUMENT, {"element_count", "5"});
  }
  ASSERT_TRUE(PutShared(r, 0, 4096, v1::DTYPE_INT32, &info).ok());
  SharedRegion small = SharedRegion::Create(*dir_, 100);
  ExpectRefused(GetShared(info.id(), small, 0, 4000), grpc::StatusCode::INVALID_ARGUMENT, {"bytes", "4000"});
  ExpectRefused(GetShared(info.id(), small, 0, 4096), grpc::StatusCode::OUT_OF_RANGE, {"shared_memory"});
  v1::SharedMemory missing;
  {
    grpc::ClientContext ctx;
    v1::GetArrayRequest req;
    req.set_id(info.id());
    req.mutable_shared_memory()->set_region("gpuscan-no-such-region");
    req.mutable_shared_memory()->set_bytes(4096);
    auto reader = stub_->GetArray(&ctx, req);
    v1::GetArrayResponse resp;
    while (reader->Read(&resp)) {
    }
    ExpectRefused(reader->Finish(), grpc::StatusCode::NOT_FOUND, {"gpuscan-no-such-region"});
  }
}

// GetArrayRequest has no header: its refusals name its own fields (shared_memory.bytes, not
// header.shared_memory.bytes nor header.element_count), and an operation's output fields are
// refused (output_region used to be where the range was written, region only read).
TEST_F(ResidentSharedMemoryTest, GetArrayRefusalsNameTheRequestsFields) {
  SharedRegion r = SharedRegion::Create(*dir_, 4096);
  v1::ArrayInfo info;
  ASSERT_TRUE(PutShared(r, 0, 4096, v1::DTYPE_INT32, &info).ok());
  SharedRegion out = SharedRegion::Create(*dir_, 4096);
  auto get = [&](const std::function<void(v1::GetArrayRequest&)>& edit) {
    grpc::ClientContext ctx;
    v1::GetArrayRequest req;
    req.set_id(info.id());
    req.mutable_shared_memory()->set_region(out.name());
    req.mutable_shared_memory()->set_bytes(4096);
    edit(req);
    auto reader = stub_->GetArray(&ctx, req);
    v1::GetArrayResponse resp;
    while (reader->Read(&resp)) {
    }
    return reader->Finish();
  };
  const grpc::Status bytes = get([](v1::GetArrayRequest& q) { q.mutable_shared_memory()->set_bytes(4000); });
  ExpectRefused(bytes, grpc::StatusCode::INVALID_ARGUMENT,
                {"shared_memory.bytes 4000 differs from the range's 4096 bytes (1024 elements of 4 bytes from offset 0)"});
  const grpc::Status missing = get([](v1::GetArrayRequest& q) { q.mutable_shared_memory()->set_region("nope"); });
  ExpectRefused(missing, grpc::StatusCode::NOT_FOUND, {"shared_memory.region \"nope\""});
  const grpc::Status output = get([&](v1::GetArrayRequest& q) { q.mutable_shared_memory()->set_output_region(r.name()); });
  ExpectRefused(output, grpc::StatusCode::INVALID_ARGUMENT, {"shared_memory.output_region", "output fields stay unset"});
  const grpc::Status both = get([](v1::GetArrayRequest& q) { q.mutable_device_memory()->set_bytes(4096); });
  ExpectRefused(both, grpc::StatusCode::INVALID_ARGUMENT, {"device_memory: cannot be combined with shared_memory"});
  const grpc::Status device = get([](v1::GetArrayRequest& q) {
    q.clear_shared_memory();
    q.mutable_device_memory()->set_device_uuid(std::string(16, '\x5a'));
    q.mutable_device_memory()->set_handle(std::string(64, '\x11'));
    q.mutable_device_memory()->set_bytes(4096);
  });
  EXPECT_EQ(device.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << device.error_message();
  for (const grpc::Status* s : {&bytes, &missing, &output, &both, &device}) {
    EXPECT_EQ(s->error_message().find("header."), std::string::npos) << s->error_message();
  }
}

}  // namespace
}  // namespace gpuscan::testing::resident_memory_tests
