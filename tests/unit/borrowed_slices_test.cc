// The client's borrowed input slices (client/src/raw_messages.h): an array in memory
// (SourceAt::Memory) leaves in slices that point into it, cut exactly as the copying path cuts any
// other Source, and a call's BorrowedSlices does not let the call return while gRPC still holds
// one of them.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "raw_messages.h"  // client/src

namespace gpuscan {
namespace {

using Clock = std::chrono::steady_clock;

std::string RandomBytes(size_t n, std::mt19937_64& rng) {
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

// Every chunk NextChunk hands out for `in`, as (bytes, whether it pointed into `array`).
struct Chunks {
  std::vector<std::string> bytes;
  std::vector<bool> in_place;
};
Chunks Drain(Source in, size_t chunk, detail::BorrowedSlices* borrowed, const std::string& array) {
  Chunks c;
  bool ended = !in;
  for (bool first = true;; first = false) {
    grpc::Slice s = detail::NextChunk(in, chunk, ended, borrowed);
    if (s.size() == 0 && !first) break;
    const char* p = reinterpret_cast<const char*>(s.begin());
    c.bytes.emplace_back(p, s.size());
    c.in_place.push_back(s.size() > 0 && p >= array.data() && p < array.data() + array.size());
    if (ended) break;
  }
  return c;
}

TEST(BorrowedSlicesTest, AnArrayInMemoryLeavesInPlaceCutAsACopiedSourceIs) {
  std::mt19937_64 rng(20261126);
  constexpr size_t kChunk = 4096;
  for (size_t n : {size_t{0}, size_t{1}, kChunk - 1, kChunk, kChunk + 1, 3 * kChunk, 3 * kChunk + 17}) {
    const std::string array = RandomBytes(n, rng);
    detail::BorrowedSlices borrowed;
    const Chunks in_place = Drain(SourceAt::Memory(array.data(), array.size()), kChunk, &borrowed, array);
    // The same array through a Source that is not a SourceAt: copied, the path every other input takes.
    SourceAt plain = SourceAt::Memory(array.data(), array.size());
    const Chunks copied = Drain([&plain](void* buf, size_t max) { return plain(buf, max); }, kChunk, &borrowed, array);
    EXPECT_EQ(in_place.bytes, copied.bytes) << "n = " << n;
    std::string joined;
    for (size_t i = 0; i < in_place.bytes.size(); ++i) {
      joined += in_place.bytes[i];
      EXPECT_EQ(in_place.in_place[i], !in_place.bytes[i].empty()) << "n = " << n << ", chunk " << i;
      EXPECT_FALSE(copied.in_place[i]) << "n = " << n << ", chunk " << i;
    }
    EXPECT_EQ(joined, array) << "n = " << n;
  }
}

TEST(BorrowedSlicesTest, WithoutBorrowedSlicesAnArrayIsCopied) {
  std::mt19937_64 rng(7);
  const std::string array = RandomBytes(10000, rng);
  const Chunks c = Drain(SourceAt::Memory(array.data(), array.size()), 4096, nullptr, array);
  ASSERT_EQ(c.bytes.size(), 3u);
  for (bool p : c.in_place) EXPECT_FALSE(p);
}

TEST(BorrowedSlicesTest, ChunkAtBorrowsTheSameBytesAsItCopies) {
  std::mt19937_64 rng(11);
  const std::string array = RandomBytes(3 * 1000 + 5, rng);
  const SourceAt at = SourceAt::Memory(array.data(), array.size());
  detail::BorrowedSlices borrowed;
  for (uint64_t g = 0; g < 5; ++g) {
    grpc::Slice b = detail::ChunkAt(at, g, 1000, &borrowed);
    grpc::Slice c = detail::ChunkAt(at, g, 1000);
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(b.begin()), b.size()),
              std::string(reinterpret_cast<const char*>(c.begin()), c.size()))
        << "chunk " << g;
    if (b.size() > 0) {
      EXPECT_EQ(reinterpret_cast<const char*>(b.begin()), array.data() + g * 1000);
    }
  }
}

TEST(BorrowedSlicesTest, TheOwnerWaitsUntilEverySliceIsReleased) {
  const std::string array(1000, 'x');
  std::atomic<bool> released{false};
  std::thread holder;
  const Clock::time_point start = Clock::now();
  {
    detail::BorrowedSlices borrowed;
    grpc::Slice s = borrowed.Borrow(array.data(), array.size());
    grpc::Slice kept = s.sub(100, 900);  // a sub-slice holds the same reference (gRPC copies short ones)
    s = grpc::Slice();
    holder = std::thread([kept = std::move(kept), &released]() mutable {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      released = true;
      kept = grpc::Slice();
    });
  }  // ~BorrowedSlices: must wait for the holder
  EXPECT_TRUE(released.load());
  EXPECT_GE(Clock::now() - start, std::chrono::milliseconds(200));
  holder.join();
}

}  // namespace
}  // namespace gpuscan
