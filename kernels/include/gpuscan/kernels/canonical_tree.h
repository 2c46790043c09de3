// The canonical association of a reproducible float scan (issue 11), host side.
//
// A float SUM or PRODUCT scan's bits depend on how the operation is associated. This fixes the
// association to GLOBAL element positions, so the bits depend only on the input (not on runs,
// chunking, threads, lanes, engine or GPU model). Both engines compute exactly this tree: the
// CPU engine with the functions below, the CUDA kernels (src/detail/agent_canonical.cuh) with
// the same operations in the same order (IEEE + and * are commutative, so only the association
// matters, never which operand is left).
//
//   segment  = 16 consecutive elements at a multiple of 16
//   tile     = 256 segments (4096 elements at a multiple of 4096)
//   super    = 256 tiles (2^20 elements at a multiple of 2^20)
//
//   t[k]   = x[16k] op x[16k+1] op ... op x[16k+15]    (left fold; a tile's segment totals)
//   Q      = HillisSteele(t)                            (inclusive, over the tile's 256 totals)
//   A      = Q[255]                                     (the tile's aggregate)
//   P      = HillisSteele(A of the super's 256 tiles)   (inclusive)
//   C_0    = none,  C_{s+1} = C_s op P_s[255]           (sequential carry across supers)
//   TP     = C_s ⊕ P[j-1]                               (tile j's prefix; ⊕: a missing side is
//   SP     = TP ⊕ Q[k-1]                                 skipped, so no identity is ever added)
//   incl.  v = SP ⊕ x[16k]; then v = v op x[i] for each following element of the segment
//   excl.  out = SP (identity if none), then out = out op x[i-1]: the same fold, one behind.
//   reduce = the inclusive value of the last element (identity if the array is empty).
//
// HillisSteele(y): for d = 1, 2, 4, ..., 128: y[i] = y[i-d] op y[i] for i >= d, every read from
// the previous level. y[i] depends on y[0..i] only, so a partial tile or super (fewer than 256
// values) gives the same prefix values as the complete one: a chunk may end anywhere, and the
// session that continues it recomputes the partial tile from its kept inputs.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "gpuscan/kernels/operators.h"

namespace gpuscan::canon {

inline constexpr uint64_t kSegItems = 16;
inline constexpr uint64_t kTileSegs = 256;
inline constexpr uint64_t kTileItems = kSegItems * kTileSegs;  // 4096
inline constexpr uint64_t kSuperTiles = 256;
inline constexpr uint64_t kSuperItems = kTileItems * kSuperTiles;  // 2^20

// Whether (T, Op) takes the canonical tree: float SUM and PRODUCT. Everything else is exact
// in any association (integers wrap; MIN/MAX are IEEE minimum/maximum), so it keeps the
// engines' fastest path.
template <class T, class Op>
inline constexpr bool kUsesTree =
    std::is_floating_point_v<T> &&
    (std::is_same_v<Op, ops::Sum<T>> || std::is_same_v<Op, ops::Product<T>>);

// A value that may be absent ("none" above).
template <class T>
struct Maybe {
  bool has = false;
  T value{};
};

template <class T, class Op>
Maybe<T> Combine(const Maybe<T>& a, const Maybe<T>& b) {
  if (!a.has) return b;
  if (!b.has) return a;
  return {true, Op()(a.value, b.value)};
}

// Inclusive Hillis-Steele over y[0..n), n <= 256, in place.
template <class T, class Op>
void HillisSteele(T* y, uint64_t n) {
  const Op op;
  T prev[256];
  for (uint64_t d = 1; d < 256; d <<= 1) {
    if (d >= n) break;  // levels with d >= n change nothing
    std::memcpy(prev, y, n * sizeof(T));
    for (uint64_t i = d; i < n; ++i) y[i] = op(prev[i - d], prev[i]);
  }
}

// Loads element i of an unaligned byte buffer.
template <class T>
T LoadAt(const unsigned char* p, uint64_t i) {
  T v;
  std::memcpy(&v, p + i * sizeof(T), sizeof(T));
  return v;
}

// Q for the first n (<= 4096) elements of a tile: the segment totals' Hillis-Steele. Returns
// the number of segments (ceil(n / 16)); Q[k] for k < that count is filled.
template <class T, class Op>
uint64_t TileQ(const unsigned char* in, uint64_t n, T* q) {
  const Op op;
  const uint64_t segs = (n + kSegItems - 1) / kSegItems;
  for (uint64_t k = 0; k < segs; ++k) {
    const uint64_t b = k * kSegItems, e = b + kSegItems < n ? b + kSegItems : n;
    T t = LoadAt<T>(in, b);
    for (uint64_t i = b + 1; i < e; ++i) t = op(t, LoadAt<T>(in, i));
    q[k] = t;
  }
  HillisSteele<T, Op>(q, segs);
  return segs;
}

// A whole tile's aggregate A = Q[255].
template <class T, class Op>
T TileAggregate(const unsigned char* in) {
  T q[kTileSegs];
  TileQ<T, Op>(in, kTileItems, q);
  return q[kTileSegs - 1];
}

// Scans the first n (<= 4096) elements of a tile whose prefix is tp into out (unaligned bytes;
// may not alias in), given the tile's Q (from TileQ over the same n elements).
template <class T, class Op>
void ScanTileQ(const unsigned char* in, unsigned char* out, uint64_t n, Maybe<T> tp, bool exclusive,
               const T* q) {
  const Op op;
  const uint64_t segs = (n + kSegItems - 1) / kSegItems;
  for (uint64_t k = 0; k < segs; ++k) {
    const Maybe<T> sp = k == 0 ? tp : Combine<T, Op>(tp, Maybe<T>{true, q[k - 1]});
    const uint64_t b = k * kSegItems, e = b + kSegItems < n ? b + kSegItems : n;
    if (exclusive) {
      T v = sp.has ? sp.value : Op::identity();
      std::memcpy(out + b * sizeof(T), &v, sizeof(T));
      for (uint64_t i = b + 1; i < e; ++i) {
        v = sp.has || i > b + 1 ? op(v, LoadAt<T>(in, i - 1)) : LoadAt<T>(in, i - 1);
        std::memcpy(out + i * sizeof(T), &v, sizeof(T));
      }
    } else {
      T v = sp.has ? op(sp.value, LoadAt<T>(in, b)) : LoadAt<T>(in, b);
      std::memcpy(out + b * sizeof(T), &v, sizeof(T));
      for (uint64_t i = b + 1; i < e; ++i) {
        v = op(v, LoadAt<T>(in, i));
        std::memcpy(out + i * sizeof(T), &v, sizeof(T));
      }
    }
  }
}

template <class T, class Op>
void ScanTile(const unsigned char* in, unsigned char* out, uint64_t n, Maybe<T> tp, bool exclusive) {
  T q[kTileSegs];
  TileQ<T, Op>(in, n, q);
  ScanTileQ<T, Op>(in, out, n, tp, exclusive, q);
}

// The part of the tree that crosses tiles: the carry over completed supers and the aggregates
// of the current super's completed tiles. Everything a session must keep besides the inputs of
// its partial last tile.
template <class T, class Op>
struct TreeState {
  uint64_t tiles = 0;  // whole tiles committed so far (the next tile's global index)
  Maybe<T> carry;      // C of the current super
  T aggs[kSuperTiles]; // raw A of the current super's tiles [0, tiles % 256)

  uint64_t tile_in_super() const { return tiles % kSuperTiles; }

  // The prefix of the next tile (global index `tiles`).
  Maybe<T> NextPrefix() const {
    const uint64_t j = tile_in_super();
    if (j == 0) return carry;
    T p[kSuperTiles];
    std::memcpy(p, aggs, j * sizeof(T));
    HillisSteele<T, Op>(p, j);
    return Combine<T, Op>(carry, Maybe<T>{true, p[j - 1]});
  }

  // Commits the aggregates of `count` whole tiles, in order, and writes each one's prefix to
  // prefixes[] (nullable). Sequential but cheap: one Hillis-Steele per super touched.
  void Commit(const T* new_aggs, uint64_t count, Maybe<T>* prefixes) {
    uint64_t done = 0;
    while (done < count) {
      const uint64_t j0 = tile_in_super();
      const uint64_t take = count - done < kSuperTiles - j0 ? count - done : kSuperTiles - j0;
      std::memcpy(aggs + j0, new_aggs + done, take * sizeof(T));
      T p[kSuperTiles];
      std::memcpy(p, aggs, (j0 + take) * sizeof(T));
      HillisSteele<T, Op>(p, j0 + take);
      if (prefixes) {
        for (uint64_t j = j0; j < j0 + take; ++j) {
          prefixes[done + j - j0] = j == 0 ? carry : Combine<T, Op>(carry, Maybe<T>{true, p[j - 1]});
        }
      }
      tiles += take;
      done += take;
      if (tile_in_super() == 0) carry = Combine<T, Op>(carry, Maybe<T>{true, p[kSuperTiles - 1]});
    }
  }

  // The inclusive value of the last of the next tile's first n (1..4096) elements: what a
  // reduce returns when the array ends there.
  T PartialTileLast(const unsigned char* in, uint64_t n) const {
    unsigned char out[kTileItems * sizeof(T)];
    ScanTile<T, Op>(in, out, n, NextPrefix(), false);
    return LoadAt<T>(out, n - 1);
  }
};

// The chunk-crossing part of a session: the tree state and the inputs of the partial tile the
// last chunk ended in (recomputed, with the next chunk's head, when that chunk comes).
template <class T, class Op>
struct Cursor {
  TreeState<T, Op> state;
  unsigned char left[kTileItems * sizeof(T)];
  uint64_t left_n = 0;  // < 4096 for a scan; 1..4096 for a reduce once anything came

  // Appends up to (4096 - left_n) elements from `in` to the partial tile; returns how many.
  uint64_t Fill(const unsigned char* in, uint64_t n) {
    const uint64_t h = n < kTileItems - left_n ? n : kTileItems - left_n;
    std::memcpy(left + left_n * sizeof(T), in, h * sizeof(T));
    left_n += h;
    return h;
  }
  // Commits the partial tile once it is whole.
  void CommitIfWhole() {
    if (left_n != kTileItems) return;
    const T a = TileAggregate<T, Op>(left);
    state.Commit(&a, 1, nullptr);
    left_n = 0;
  }
};

// One chunk of a scan session, whatever its length: the head completes the partial tile the
// last chunk ended in (recomputed from its kept inputs; only the new outputs are written),
// whole tiles go to whole(src, dst, tiles), which must scan them from cur.state and Commit
// their aggregates (the engine's parallel part), and the tail starts a new partial tile,
// scanned now and kept for the next chunk.
template <class T, class Op, class Whole>
void ScanChunk(Cursor<T, Op>& cur, const unsigned char* src, unsigned char* dst, uint64_t n, bool exclusive,
               Whole&& whole) {
  uint64_t pos = 0;
  if (cur.left_n > 0) {
    const uint64_t before = cur.left_n;
    pos = cur.Fill(src, n);
    unsigned char tile_out[kTileItems * sizeof(T)];
    ScanTile<T, Op>(cur.left, tile_out, cur.left_n, cur.state.NextPrefix(), exclusive);
    std::memcpy(dst, tile_out + before * sizeof(T), pos * sizeof(T));
    cur.CommitIfWhole();
  }
  const uint64_t tiles = (n - pos) / kTileItems;
  if (tiles > 0) {
    whole(src + pos * sizeof(T), dst + pos * sizeof(T), tiles);
    pos += tiles * kTileItems;
  }
  if (pos < n) {
    cur.Fill(src + pos * sizeof(T), n - pos);
    ScanTile<T, Op>(cur.left, dst + pos * sizeof(T), cur.left_n, cur.state.NextPrefix(), exclusive);
  }
}

// One chunk of a reduce session. The last 1..4096 elements stay uncommitted (the result is
// the inclusive value of the last element, which needs its tile's inputs); whole(src, tiles)
// must Commit the aggregates of the whole tiles before them.
template <class T, class Op, class Whole>
void ReduceChunk(Cursor<T, Op>& cur, const unsigned char* src, uint64_t n, Whole&& whole) {
  if (n == 0) return;
  cur.CommitIfWhole();  // more came, so a kept whole tile is not the last one
  uint64_t pos = cur.Fill(src, n);
  if (pos == n) return;
  cur.CommitIfWhole();  // whole now, and more follows
  const uint64_t tiles = (n - pos - 1) / kTileItems;  // leaves 1..4096 elements
  if (tiles > 0) {
    whole(src + pos * sizeof(T), tiles);
    pos += tiles * kTileItems;
  }
  cur.Fill(src + pos * sizeof(T), n - pos);
}

template <class T, class Op>
T ReduceResult(const Cursor<T, Op>& cur) {
  return cur.left_n == 0 ? Op::identity() : cur.state.PartialTileLast(cur.left, cur.left_n);
}

}  // namespace gpuscan::canon
