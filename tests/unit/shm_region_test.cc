// The shared-memory region checks, the mapping cache and the SIGBUS net, without a server: every
// refusal names the field and value, a region truncated under its mapping is reported instead of
// killing the process (whichever thread touches it), and the cache never serves a changed file.
#include "service/shm_region.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace gpuscan::server::shm {
namespace {

constexpr char kField[] = "header.shared_memory.region";

class ShmRegionTest : public ::testing::Test {
 protected:
  static constexpr std::uint64_t kPinLimit = 3 * 4096;
  // A registrar that records what it registered (as the CUDA engine's would pin it).
  Registrar Pinner() {
    return [this](void*, std::uint64_t bytes, bool) {
      ++registrations_;
      return std::shared_ptr<void>(new std::uint64_t(bytes), [](void* p) { delete static_cast<std::uint64_t*>(p); });
    };
  }
  int registrations_ = 0;
  void SetUp() override {
    char pattern[] = "/tmp/gpuscan-shm-test-XXXXXX";  // unique per test: tests run in parallel
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
    std::string error;
    regions_ = RegionDir::Open(dir_, kPinLimit, Pinner(), &error);
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
                   RegionView* out, bool writable = false) {
    return regions_->Map(kField, name, offset, bytes, 4, writable, out);
  }
  std::string dir_;
  std::unique_ptr<RegionDir> regions_;
  std::vector<std::string> created_;
};

TEST_F(ShmRegionTest, MapsTheRequestedRange) {
  auto content = Create("in", 3 * 4096 + 64);
  RegionView region;
  ASSERT_TRUE(Map("in", 4100, 8192, &region).ok());
  EXPECT_EQ(region.bytes(), 8192u);
  EXPECT_EQ(std::memcmp(region.data(), content.data() + 4100, 8192), 0);
}

TEST_F(ShmRegionTest, WritesLandInTheClientsPages) {
  Create("out", 4096);
  RegionView region;
  ASSERT_TRUE(Map("out", 8, 16, &region, /*writable=*/true).ok());
  std::memset(region.data(), 0x5a, 16);
  region = RegionView();
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
  RegionView region;
  ASSERT_TRUE(Map("empty", 0, 0, &region).ok());
  EXPECT_EQ(region.bytes(), 0u);
}

void ExpectRefused(const grpc::Status& status, grpc::StatusCode code, const std::string& value) {
  EXPECT_EQ(status.error_code(), code) << status.error_message();
  EXPECT_NE(status.error_message().find(kField), std::string::npos) << status.error_message();
  EXPECT_NE(status.error_message().find(value), std::string::npos) << status.error_message();
}

TEST_F(ShmRegionTest, OffWithoutShmDir) {
  auto off = RegionDir::Disabled();
  RegionView region;
  ExpectRefused(off->Map(kField, "in", 0, 4, 4, false, &region), grpc::StatusCode::FAILED_PRECONDITION, "--shm-dir");
}

TEST_F(ShmRegionTest, RefusesPathsAndMissingNames) {
  RegionView region;
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
  RegionView region;
  ExpectRefused(Map("link", 0, 4, &region), grpc::StatusCode::INVALID_ARGUMENT, "\"link\"");
}

TEST_F(ShmRegionTest, RefusesTooSmallAndMisaligned) {
  Create("small", 64);
  RegionView region;
  ExpectRefused(Map("small", 32, 64, &region), grpc::StatusCode::OUT_OF_RANGE, "64 bytes");
  ExpectRefused(Map("small", 2, 8, &region), grpc::StatusCode::INVALID_ARGUMENT, "offset 2");
  ExpectRefused(Map("small", 0, 6, &region), grpc::StatusCode::INVALID_ARGUMENT, "bytes 6");
}

TEST_F(ShmRegionTest, RefusesWhatTheServerMayNotOpen) {
  if (geteuid() == 0) GTEST_SKIP() << "root opens any file";
  Create("locked", 64, 0000);
  RegionView region;
  ExpectRefused(Map("locked", 0, 64, &region), grpc::StatusCode::PERMISSION_DENIED, "\"locked\"");
}

TEST_F(ShmRegionTest, ShrinkDuringTheCallIsCaughtOnAnyThread) {
  Create("shrinks", 4 * 4096);
  RegionView region;
  ASSERT_TRUE(Map("shrinks", 0, 4 * 4096, &region).ok());
  ASSERT_TRUE(region.CheckIntact(kField).ok());
  ASSERT_EQ(truncate((dir_ + "/shrinks").c_str(), 4096), 0);  // the client truncates mid-call
  // Threads of their own touch the missing pages (as TBB workers would): they finish.
  std::vector<std::thread> touchers;
  std::atomic<unsigned> sum{0};
  for (int t = 0; t < 4; ++t) {
    touchers.emplace_back([&, t] {
      unsigned local = 0;
      for (std::size_t i = t; i < region.bytes(); i += 4) local += static_cast<unsigned>(region.data()[i]);
      sum += local;
    });
  }
  for (auto& t : touchers) t.join();
  auto status = region.CheckIntact(kField);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(status.error_message().find("shrank"), std::string::npos);
  EXPECT_NE(status.error_message().find("\"shrinks\""), std::string::npos);
  // The next call maps the file afresh: the patched mapping is never served again.
  RegionView again;
  ExpectRefused(Map("shrinks", 0, 4 * 4096, &again), grpc::StatusCode::OUT_OF_RANGE, "4096 bytes");
  ASSERT_TRUE(Map("shrinks", 0, 4096, &again).ok());
  EXPECT_TRUE(again.CheckIntact(kField).ok());
}

TEST_F(ShmRegionTest, ShrinkWithoutATouchIsCaughtBySize) {
  Create("shrinks", 2 * 4096);
  RegionView region;
  ASSERT_TRUE(Map("shrinks", 0, 2 * 4096, &region).ok());
  ASSERT_EQ(truncate((dir_ + "/shrinks").c_str(), 4096), 0);  // DMA would not have touched it
  EXPECT_EQ(region.CheckIntact(kField).error_code(), grpc::StatusCode::FAILED_PRECONDITION);
}

TEST_F(ShmRegionTest, ResizeBackAndForthDuringTheCallIsCaught) {
  Create("resized", 2 * 4096);
  RegionView region;
  ASSERT_TRUE(Map("resized", 0, 2 * 4096, &region, true).ok());
  ASSERT_TRUE(Map("resized", 0, 2 * 4096, &region, true).ok());
  ASSERT_TRUE(region.registered());  // the DMA path: its pages would now be detached from the file
  ASSERT_EQ(truncate((dir_ + "/resized").c_str(), 0), 0);
  ASSERT_EQ(truncate((dir_ + "/resized").c_str(), 2 * 4096), 0);
  auto status = region.CheckIntact(kField);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(status.error_message().find("resized"), std::string::npos) << status.error_message();
}

TEST_F(ShmRegionTest, CacheReusesAnUnchangedFileAndDropsChangedOnes) {
  auto content = Create("in", 2 * 4096);
  RegionView a, b;
  ASSERT_TRUE(Map("in", 0, 4096, &a).ok());
  EXPECT_FALSE(a.registered());  // first use: staged
  ASSERT_TRUE(Map("in", 4096, 4096, &b).ok());
  EXPECT_EQ(regions_->maps(), 1u);  // one mapping of the whole file serves both ranges
  EXPECT_EQ(registrations_, 1);     // registered on its second use
  EXPECT_TRUE(a.registered());
  EXPECT_FALSE(a.Overlaps(b));
  EXPECT_EQ(std::memcmp(b.data(), content.data() + 4096, 4096), 0);
  // Our own writes through the mapping keep the entry.
  RegionView w;
  ASSERT_TRUE(Map("in", 0, 8, &w, true).ok());
  std::memset(w.data(), 7, 8);
  ASSERT_TRUE(Map("in", 0, 8, &w, true).ok());
  EXPECT_EQ(regions_->maps(), 1u);
  // A new file under the same name is a new mapping, with the new contents.
  a = b = w = RegionView();
  unlink((dir_ + "/in").c_str());
  auto fresh = Create("in", 2 * 4096);
  fresh[0] ^= 0xff;
  int fd = open((dir_ + "/in").c_str(), O_WRONLY);
  ASSERT_EQ(pwrite(fd, fresh.data(), 1, 0), 1);
  close(fd);
  ASSERT_TRUE(Map("in", 0, 4096, &a).ok());
  EXPECT_EQ(regions_->maps(), 2u);
  EXPECT_EQ(std::memcmp(a.data(), fresh.data(), 4096), 0);
  // Resized in place (shrunk, then grown back): not the cached pages any more.
  ASSERT_EQ(truncate((dir_ + "/in").c_str(), 4096), 0);
  ASSERT_EQ(truncate((dir_ + "/in").c_str(), 2 * 4096), 0);
  ASSERT_TRUE(Map("in", 4096, 4096, &b).ok());
  EXPECT_EQ(regions_->maps(), 3u);
  EXPECT_EQ(b.data()[0], std::byte{0});  // the regrown half reads as zeros, as the client sees it
}

// SharedMemory.arena: a client's long-lived arena is registered on its first use, and every
// range of it then maps registered through the one cached mapping; the pin limit still holds.
TEST_F(ShmRegionTest, ArenaRegionsAreRegisteredOnTheirFirstUse) {
  auto content = Create("arena", 2 * 4096);
  RegionView a, b;
  ASSERT_TRUE(regions_->Map(kField, "arena", 4096, 4096, 4, true, &a, /*arena=*/true).ok());
  EXPECT_TRUE(a.registered());
  EXPECT_EQ(registrations_, 1);
  EXPECT_EQ(std::memcmp(a.data(), content.data() + 4096, 4096), 0);
  ASSERT_TRUE(regions_->Map(kField, "arena", 0, 8, 4, false, &b, /*arena=*/true).ok());
  EXPECT_TRUE(b.registered());
  EXPECT_EQ(regions_->maps(), 1u);
  EXPECT_EQ(registrations_, 1);  // once
  // Over the pin limit (4 pages more would pass 3): still served, staged.
  Create("big", 4 * 4096);
  RegionView c;
  ASSERT_TRUE(regions_->Map(kField, "big", 0, 4096, 4, false, &c, /*arena=*/true).ok());
  EXPECT_FALSE(c.registered());
  EXPECT_LE(regions_->pinned_bytes(), kPinLimit);
}

// A region deleted while the server holds it mapped and registered (a client that exits with
// its arena) is let go at once, with no call to trigger it; one still in use stays valid.
TEST_F(ShmRegionTest, DeletedRegionsAreLetGoWithoutAnotherCall) {
  const auto content = Create("gone", 2 * 4096);
  Create("kept", 4096);
  RegionView v, k;
  ASSERT_TRUE(regions_->Map(kField, "gone", 0, 4096, 4, false, &v, /*arena=*/true).ok());
  ASSERT_TRUE(regions_->Map(kField, "kept", 0, 4096, 4, false, &k, /*arena=*/true).ok());
  EXPECT_EQ(regions_->pinned_bytes(), 3u * 4096);
  ASSERT_EQ(unlink((dir_ + "/gone").c_str()), 0);
  auto waited = [&](auto done) {
    for (int i = 0; i < 100 && !done(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    return done();
  };
  EXPECT_TRUE(waited([&] { return regions_->cached_files() == 1u; }));  // "kept" stays
  EXPECT_EQ(regions_->pinned_bytes(), 4096u);
  EXPECT_EQ(std::memcmp(v.data(), content.data(), 4096), 0);  // the view in use still reads its pages
  v = k = RegionView();
  EXPECT_EQ(regions_->cached_files(), 1u);  // idle, but still linked: kept for the next call
}

TEST_F(ShmRegionTest, DeletedRegionsLeaveTheCacheAndPinsStayUnderTheLimit) {
  Create("x", 2 * 4096);
  Create("y", 2 * 4096);
  RegionView x, y;
  ASSERT_TRUE(Map("x", 0, 4096, &x).ok());
  ASSERT_TRUE(Map("x", 0, 4096, &x).ok());  // registered from the second use
  EXPECT_TRUE(x.registered());
  ASSERT_TRUE(Map("y", 0, 4096, &y).ok());
  ASSERT_TRUE(Map("y", 0, 4096, &y).ok());
  EXPECT_FALSE(y.registered());  // x is in use and 4 pages would pass the 3-page limit
  EXPECT_LE(regions_->pinned_bytes(), kPinLimit);
  x = y = RegionView();
  ASSERT_TRUE(Map("y", 4096, 4096, &y).ok());  // idle x makes room: y is mapped registered now
  EXPECT_TRUE(y.registered());
  EXPECT_LE(regions_->pinned_bytes(), kPinLimit);
  y = RegionView();
  unlink((dir_ + "/x").c_str());
  unlink((dir_ + "/y").c_str());
  created_.clear();
  Create("z", 64);
  RegionView z;
  ASSERT_TRUE(Map("z", 0, 64, &z).ok());
  EXPECT_EQ(regions_->cached_files(), 1u);  // x and y were deleted: their memory is freed
}

TEST_F(ShmRegionTest, OutputNeedsAFileTheServerMayWrite) {
  if (geteuid() == 0) GTEST_SKIP() << "root opens any file";
  Create("readonly", 64, 0400);
  RegionView region;
  ASSERT_TRUE(Map("readonly", 0, 64, &region).ok());  // read: fine
  ExpectRefused(Map("readonly", 0, 64, &region, true), grpc::StatusCode::PERMISSION_DENIED, "for writing");
}

}  // namespace
}  // namespace gpuscan::server::shm
