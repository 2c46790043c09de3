// The client's shared-memory arena (gpuscan/shared_arena.h) without a server: pieces on 4 KiB
// pages that never overlap, freed runs merged and reused, regions grown as documented, reused
// pieces zeroed (or left when asked), a region deleted by someone else left alone, regions kept
// while any piece lives, and many threads carving at once. The calls on pieces run in
// tests/integration/shared_memory_test.cc.
#include "gpuscan/shared_arena.h"

#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace gpuscan {
namespace {

class SharedArenaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/gpuscan-arena-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { EXPECT_EQ(rmdir(dir_.c_str()), 0) << "a region outlived its arena and pieces"; }

  size_t Files() const {
    size_t n = 0;
    DIR* d = opendir(dir_.c_str());
    while (dirent* e = readdir(d)) n += e->d_name[0] != '.';
    closedir(d);
    return n;
  }

  std::string dir_;
};

TEST_F(SharedArenaTest, PiecesAreAlignedDisjointAndGoBack) {
  SharedArena arena(dir_);
  std::vector<SharedPiece> pieces;
  pieces.push_back(arena.Carve<int32_t>(1000));  // first region: 4 x 4 KiB
  EXPECT_EQ(arena.bytes(), 4 * SharedArena::kAlign);
  pieces.push_back(arena.Carve(1));
  pieces.push_back(arena.Carve(SharedArena::kAlign));
  pieces.push_back(arena.Carve(0));
  EXPECT_EQ(arena.regions().size(), 1u);
  for (const SharedPiece& p : pieces) {
    EXPECT_EQ(p.span().offset % SharedArena::kAlign, 0u);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p.data()) % SharedArena::kAlign, 0u);
    EXPECT_TRUE(p.span().arena);
    EXPECT_EQ(p.span().region, arena.regions()[0]);
  }
  EXPECT_EQ(pieces[0].size<int32_t>(), 1000u);
  EXPECT_EQ(pieces[1].bytes(), 1u);
  std::vector<uint64_t> offsets;
  for (const SharedPiece& p : pieces) offsets.push_back(p.span().offset);
  std::sort(offsets.begin(), offsets.end());
  EXPECT_EQ(std::adjacent_find(offsets.begin(), offsets.end()), offsets.end());
  EXPECT_EQ(arena.free_bytes(), 0u);
  pieces.clear();
  EXPECT_EQ(arena.free_bytes(), arena.bytes());
  // Merged back into one run: a piece of the whole region fits without a new one.
  SharedPiece whole = arena.Carve(arena.bytes());
  EXPECT_EQ(whole.span().offset, 0u);
  EXPECT_EQ(arena.regions().size(), 1u);
}

TEST_F(SharedArenaTest, RegionsGrowAsDocumented) {
  SharedArena arena(dir_);
  SharedPiece a = arena.Carve(10000);  // 12 KiB rounded: a region of 4 x 12 KiB
  EXPECT_EQ(arena.bytes(), 48u << 10);
  SharedPiece b = arena.Carve(40u << 10);  // 36 KiB left: a new region of 4 x 40 KiB
  EXPECT_EQ(arena.regions().size(), 2u);
  EXPECT_EQ(arena.bytes(), (48u + 160u) << 10);
  EXPECT_EQ(Files(), 2u);

  SharedArena sized(dir_, 64u << 10);
  SharedPiece c = sized.Carve(1);
  EXPECT_EQ(sized.bytes(), 64u << 10);
  SharedPiece d = sized.Carve(64u << 10);  // 60 KiB left: another initial_bytes
  EXPECT_EQ(sized.bytes(), 128u << 10);
  SharedPiece e = sized.Carve(64u << 10);  // as much as all before
  EXPECT_EQ(sized.bytes(), 256u << 10);
  SharedPiece f = sized.Carve(1u << 20);  // larger than that: its own size
  EXPECT_EQ(sized.bytes(), (256u << 10) + (1u << 20));
  EXPECT_EQ(sized.regions().size(), 4u);
}

TEST_F(SharedArenaTest, ReusedPiecesAreZeroedUnlessAskedNotTo) {
  SharedArena arena(dir_, 64u << 10);
  {
    SharedPiece p = arena.Carve(20000);
    std::memset(p.data(), 0xab, p.bytes());
  }
  SharedPiece kept = arena.Carve(20000, /*zero=*/false);
  EXPECT_EQ(kept.span().offset, 0u);
  EXPECT_EQ(kept.as<unsigned char>()[19999], 0xab);
  std::memset(kept.data(), 0xcd, kept.bytes());
  kept = SharedPiece{};
  SharedPiece zeroed = arena.Carve(30000);
  EXPECT_EQ(zeroed.span().offset, 0u);
  const auto* z = zeroed.as<unsigned char>();
  EXPECT_TRUE(std::all_of(z, z + zeroed.bytes(), [](unsigned char c) { return c == 0; }));
}

TEST_F(SharedArenaTest, ARegionDeletedByAnotherIsNotCarvedAgain) {
  SharedArena arena(dir_, 64u << 10);
  std::string first;
  {
    SharedPiece p = arena.Carve(100);
    first = p.span().region;
    ASSERT_EQ(unlink((dir_ + "/" + first).c_str()), 0);
  }
  SharedPiece q = arena.Carve(100);
  EXPECT_NE(q.span().region, first);
  EXPECT_EQ(arena.regions().size(), 2u);
}

TEST_F(SharedArenaTest, PiecesOutliveTheirArena) {
  SharedPiece p;
  {
    SharedArena arena(dir_);
    p = arena.Carve<int64_t>(3);
  }
  EXPECT_EQ(Files(), 1u);  // the region stays while its piece does
  p.as<int64_t>()[2] = 42;
  EXPECT_EQ(p.as<int64_t>()[2], 42);
  p = SharedPiece{};
  EXPECT_EQ(Files(), 0u);
}

// Threads carve and free at once; each fills its pieces with its own pattern and checks it is
// still there before freeing, so an overlap between two live pieces would show.
TEST_F(SharedArenaTest, ManyThreadsCarveDisjointPieces) {
  SharedArena arena(dir_, 1u << 20);
  std::vector<std::thread> threads;
  std::vector<int> bad(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(1234 + t);
      std::vector<SharedPiece> live;
      for (int i = 0; i < 400; ++i) {
        if (!live.empty() && rng() % 3 == 0) {
          SharedPiece& p = live[rng() % live.size()];
          const auto* c = p.as<unsigned char>();
          bad[t] += !std::all_of(c, c + p.bytes(), [&](unsigned char v) { return v == 0x10 + t; });
          std::swap(p, live.back());
          live.pop_back();
        } else {
          live.push_back(arena.Carve(1 + rng() % 50000));
          std::memset(live.back().data(), 0x10 + t, live.back().bytes());
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad, std::vector<int>(4, 0));
}

}  // namespace
}  // namespace gpuscan
