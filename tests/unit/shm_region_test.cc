// The shared-memory region checks and the SIGBUS guard, without a server: every refusal names the
// field and value, and a region truncated under its mapping fails the guarded touch instead of
// killing the process.
#include "service/shm_region.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace gpuscan::server::shm {
namespace {

constexpr char kField[] = "header.shared_memory.region";

class ShmRegionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/gpuscan-shm-test-XXXXXX";  // unique per test: tests run in parallel
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
    std::string error;
    regions_ = RegionDir::Open(dir_, &error);
    ASSERT_NE(regions_, nullptr) << error;
  }
  void TearDown() override {
    for (const auto& name : created_) unlink((dir_ + "/" + name).c_str());
    rmdir(dir_.c_str());
  }
  // A region of `bytes` random (never zero) bytes; returns its contents.
  std::vector<unsigned char> Create(const std::string& name, std::size_t bytes, mode_t mode = 0600) {
    std::vector<unsigned char> content(bytes);
    std::mt19937 rng(42);
    for (auto& b : content) b = static_cast<unsigned char>(1 + rng() % 255);
    const std::string path = dir_ + "/" + name;
    int fd = open(path.c_str(), O_CREAT | O_RDWR | O_TRUNC, mode);
    EXPECT_GE(fd, 0);
    EXPECT_EQ(write(fd, content.data(), bytes), static_cast<ssize_t>(bytes));
    close(fd);
    chmod(path.c_str(), mode);
    created_.push_back(name);
    return content;
  }
  grpc::Status Map(const std::string& name, std::uint64_t offset, std::uint64_t bytes,
                   std::unique_ptr<MappedRegion>* out, bool writable = false) {
    return regions_->Map(kField, name, offset, bytes, 4, writable, out);
  }
  std::string dir_;
  std::unique_ptr<RegionDir> regions_;
  std::vector<std::string> created_;
};

TEST_F(ShmRegionTest, MapsTheRequestedRange) {
  auto content = Create("in", 3 * 4096 + 64);
  std::unique_ptr<MappedRegion> region;
  ASSERT_TRUE(Map("in", 4100, 8192, &region).ok());
  EXPECT_EQ(region->bytes(), 8192u);
  EXPECT_EQ(std::memcmp(region->data(), content.data() + 4100, 8192), 0);
}

TEST_F(ShmRegionTest, WritesLandInTheClientsPages) {
  Create("out", 4096);
  std::unique_ptr<MappedRegion> region;
  ASSERT_TRUE(Map("out", 8, 16, &region, /*writable=*/true).ok());
  std::memset(region->data(), 0x5a, 16);
  region.reset();
  int fd = open((dir_ + "/out").c_str(), O_RDONLY);
  unsigned char back[32];
  ASSERT_EQ(pread(fd, back, 32, 0), 32);
  close(fd);
  EXPECT_EQ(back[8], 0x5a);
  EXPECT_EQ(back[23], 0x5a);
  EXPECT_NE(back[24], 0x5a);
}

TEST_F(ShmRegionTest, ZeroBytesMaps) {
  Create("empty", 0);
  std::unique_ptr<MappedRegion> region;
  ASSERT_TRUE(Map("empty", 0, 0, &region).ok());
  EXPECT_EQ(region->bytes(), 0u);
}

void ExpectRefused(const grpc::Status& status, grpc::StatusCode code, const std::string& value) {
  EXPECT_EQ(status.error_code(), code) << status.error_message();
  EXPECT_NE(status.error_message().find(kField), std::string::npos) << status.error_message();
  EXPECT_NE(status.error_message().find(value), std::string::npos) << status.error_message();
}

TEST_F(ShmRegionTest, OffWithoutShmDir) {
  auto off = RegionDir::Disabled();
  std::unique_ptr<MappedRegion> region;
  ExpectRefused(off->Map(kField, "in", 0, 4, 4, false, &region), grpc::StatusCode::FAILED_PRECONDITION, "--shm-dir");
}

TEST_F(ShmRegionTest, RefusesPathsAndMissingNames) {
  std::unique_ptr<MappedRegion> region;
  ExpectRefused(Map("../x", 0, 4, &region), grpc::StatusCode::INVALID_ARGUMENT, "\"../x\"");
  ExpectRefused(Map("a/b", 0, 4, &region), grpc::StatusCode::INVALID_ARGUMENT, "\"a/b\"");
  ExpectRefused(Map("..", 0, 4, &region), grpc::StatusCode::INVALID_ARGUMENT, "\"..\"");
  ExpectRefused(Map("", 0, 4, &region), grpc::StatusCode::INVALID_ARGUMENT, "\"\"");
  ExpectRefused(Map("missing", 0, 4, &region), grpc::StatusCode::NOT_FOUND, "\"missing\"");
}

TEST_F(ShmRegionTest, RefusesSymlinks) {
  Create("target", 64);
  ASSERT_EQ(symlink((dir_ + "/target").c_str(), (dir_ + "/link").c_str()), 0);
  created_.push_back("link");
  std::unique_ptr<MappedRegion> region;
  ExpectRefused(Map("link", 0, 4, &region), grpc::StatusCode::INVALID_ARGUMENT, "\"link\"");
}

TEST_F(ShmRegionTest, RefusesTooSmallAndMisaligned) {
  Create("small", 64);
  std::unique_ptr<MappedRegion> region;
  ExpectRefused(Map("small", 32, 64, &region), grpc::StatusCode::OUT_OF_RANGE, "64 bytes");
  ExpectRefused(Map("small", 2, 8, &region), grpc::StatusCode::INVALID_ARGUMENT, "offset 2");
  ExpectRefused(Map("small", 0, 6, &region), grpc::StatusCode::INVALID_ARGUMENT, "bytes 6");
}

TEST_F(ShmRegionTest, RefusesWhatTheServerMayNotOpen) {
  if (geteuid() == 0) GTEST_SKIP() << "root opens any file";
  Create("locked", 64, 0000);
  std::unique_ptr<MappedRegion> region;
  ExpectRefused(Map("locked", 0, 64, &region), grpc::StatusCode::PERMISSION_DENIED, "\"locked\"");
}

TEST_F(ShmRegionTest, ShrinkDuringTheCallFailsTheGuardedTouch) {
  Create("shrinks", 4 * 4096);
  std::unique_ptr<MappedRegion> region;
  ASSERT_TRUE(Map("shrinks", 0, 4 * 4096, &region).ok());
  ASSERT_EQ(truncate((dir_ + "/shrinks").c_str(), 4096), 0);  // the client truncates mid-call
  volatile unsigned sum = 0;
  const bool finished = RunGuarded([&] {
    for (std::size_t i = 0; i < region->bytes(); ++i) sum = sum + static_cast<unsigned>(region->data()[i]);
  });
  EXPECT_FALSE(finished);
  auto status = ShrankStatus(kField, region->name());
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(status.error_message().find("shrank"), std::string::npos);
  // The guard is reusable and the process keeps working.
  EXPECT_TRUE(RunGuarded([&] { sum = sum + static_cast<unsigned>(region->data()[0]); }));
}

}  // namespace
}  // namespace gpuscan::server::shm
