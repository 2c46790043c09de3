// Deterministic float SUM / PRODUCT on the pool: the canonical tree of
// gpuscan/kernels/canonical_tree.h, whose association is tied to global element positions, so
// the bits depend on the input only (not on the chunking or the thread count) and match the
// CUDA engine's. The scan and reduce sessions (scan_sessions.cc, reduce_sessions.cc) run these
// as their algorithm "deterministic".
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "engine/cpu/blocks.h"
#include "gpuscan/kernels/canonical_tree.h"

namespace gpuscan::engine::cpu {

// Runs f(t) for t in [0, count) tiles, several tiles per task; the arithmetic per tile is the
// same whoever runs it.
template <class F>
void ForTiles(Pool& pool, uint64_t count, bool parallel, const F& f) {
  constexpr uint64_t kTilesPerTask = kBlock / canon::kTileItems;  // 4
  const uint64_t tasks = (count + kTilesPerTask - 1) / kTilesPerTask;
  ForBlocks(pool, tasks, parallel, [&](uint64_t b) {
    const uint64_t end = std::min(count, (b + 1) * kTilesPerTask);
    for (uint64_t t = b * kTilesPerTask; t < end; ++t) f(t);
  });
}

template <class T_, class Op, bool kExclusive>
class TreeScanner {
 public:
  using T = T_;
  static constexpr const char* kAlgorithm = "deterministic";

  void Run(Pool& pool, const unsigned char* in, unsigned char* out, uint64_t n) {
    canon::ScanChunk<T, Op>(cur_, in, out, n, kExclusive,
                            [&](const unsigned char* src, unsigned char* dst, uint64_t tiles) {
                              ScanWholeTiles(pool, src, dst, tiles);
                            });
  }

 private:
  // Q and A of every tile (parallel), the tiles' prefixes (sequential, a few values per tile),
  // then every tile from its prefix (parallel).
  void ScanWholeTiles(Pool& pool, const unsigned char* src, unsigned char* dst, uint64_t tiles) {
    constexpr uint64_t kTile = canon::kTileItems;
    const bool parallel = RunParallel(pool, tiles * kTile);
    std::vector<T> q(tiles * canon::kTileSegs);
    std::vector<T> aggs(tiles);
    ForTiles(pool, tiles, parallel, [&](uint64_t t) {
      T* qt = q.data() + t * canon::kTileSegs;
      canon::TileQ<T, Op>(src + t * kTile * sizeof(T), kTile, qt);
      aggs[t] = qt[canon::kTileSegs - 1];
    });
    std::vector<canon::Maybe<T>> prefixes(tiles);
    cur_.state.Commit(aggs.data(), tiles, prefixes.data());
    ForTiles(pool, tiles, parallel, [&](uint64_t t) {
      canon::ScanTileQ<T, Op>(src + t * kTile * sizeof(T), dst + t * kTile * sizeof(T), kTile, prefixes[t],
                              kExclusive, q.data() + t * canon::kTileSegs);
    });
  }

  canon::Cursor<T, Op> cur_;
};

template <class T_, class Op>
class TreeReducer {
 public:
  using T = T_;
  static constexpr const char* kAlgorithm = "deterministic";

  void Run(Pool& pool, const unsigned char* in, uint64_t n) {
    canon::ReduceChunk<T, Op>(cur_, in, n, [&](const unsigned char* src, uint64_t tiles) {
      constexpr uint64_t kTile = canon::kTileItems;
      std::vector<T> aggs(tiles);
      ForTiles(pool, tiles, RunParallel(pool, tiles * kTile), [&](uint64_t t) {
        aggs[t] = canon::TileAggregate<T, Op>(src + t * kTile * sizeof(T));
      });
      cur_.state.Commit(aggs.data(), tiles, nullptr);
    });
  }
  T total() const { return canon::ReduceResult(cur_); }

 private:
  canon::Cursor<T, Op> cur_;
};

}  // namespace gpuscan::engine::cpu
