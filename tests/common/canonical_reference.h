// An independent, whole-array statement of the canonical float tree (issue 11), written from
// its definition in gpuscan/kernels/canonical_tree.h without that header's code, so the CPU
// engine, the CUDA kernels and the CUDA engine can all be checked against it bit for bit.
// Slow and simple: it materialises every level for the whole array.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "gpuscan/kernels/segmented.h"

namespace gpuscan::testing {

namespace canonical_detail {

template <class T, class Op>
std::optional<T> Join(const std::optional<T>& a, const std::optional<T>& b) {
  if (!a) return b;
  if (!b) return a;
  return Op()(*a, *b);
}

// Inclusive Hillis-Steele: level d reads only the level before it.
template <class T, class Op>
std::vector<T> HillisSteele(std::vector<T> y) {
  for (std::size_t d = 1; d < 256; d *= 2) {
    const std::vector<T> prev = y;
    for (std::size_t i = d; i < y.size(); ++i) y[i] = Op()(prev[i - d], prev[i]);
  }
  return y;
}

}  // namespace canonical_detail

// Inclusive or exclusive canonical scan of the whole array. carry0: the tree's initial carry C_0
// (none by default; the widening scans' carry in, gpuscan/kernels/scan_widen.h).
template <class T, class Op>
std::vector<T> CanonicalScanRef(const std::vector<T>& x, bool exclusive, std::optional<T> carry0 = std::nullopt) {
  using canonical_detail::HillisSteele;
  using canonical_detail::Join;
  constexpr std::size_t kSeg = 16, kTile = 4096, kSuper = 256;
  const std::size_t n = x.size();
  const std::size_t tiles = (n + kTile - 1) / kTile;
  // Q of every tile (partial last tile: its segments only).
  std::vector<std::vector<T>> q(tiles);
  for (std::size_t g = 0; g < tiles; ++g) {
    std::vector<T> t;
    for (std::size_t b = g * kTile; b < n && b < (g + 1) * kTile; b += kSeg) {
      T acc = x[b];
      for (std::size_t i = b + 1; i < b + kSeg && i < n; ++i) acc = Op()(acc, x[i]);
      t.push_back(acc);
    }
    q[g] = HillisSteele<T, Op>(t);
  }
  // P of every super, over its tiles' aggregates (a partial last tile's is never needed).
  const std::size_t supers = (tiles + kSuper - 1) / kSuper;
  std::vector<std::vector<T>> p(supers);
  for (std::size_t s = 0; s < supers; ++s) {
    std::vector<T> a;
    for (std::size_t g = s * kSuper; g < tiles && g < (s + 1) * kSuper; ++g) a.push_back(q[g].back());
    p[s] = HillisSteele<T, Op>(a);
  }
  std::vector<std::optional<T>> carry(supers + 1);
  carry[0] = carry0;
  for (std::size_t s = 0; s < supers; ++s) {
    carry[s + 1] = p[s].size() == kSuper ? Join<T, Op>(carry[s], p[s].back()) : std::nullopt;
  }
  std::vector<T> out(n);
  for (std::size_t b = 0; b < n; b += kSeg) {
    const std::size_t g = b / kTile, s = g / kSuper, j = g % kSuper, k = (b % kTile) / kSeg;
    std::optional<T> sp = carry[s];
    if (j > 0) sp = Join<T, Op>(sp, p[s][j - 1]);
    if (k > 0) sp = Join<T, Op>(sp, q[g][k - 1]);
    std::optional<T> v = sp;
    for (std::size_t i = b; i < b + kSeg && i < n; ++i) {
      if (exclusive) out[i] = v ? *v : Op::identity();
      v = Join<T, Op>(v, x[i]);
      if (!exclusive) out[i] = *v;
    }
  }
  return out;
}

// The canonical reduction: the inclusive scan's last element (identity when empty).
template <class T, class Op>
T CanonicalReduceRef(const std::vector<T>& x) {
  if (x.empty()) return Op::identity();
  return CanonicalScanRef<T, Op>(x, false).back();
}

// A reproducible segmented scan (gpuscan.v1.SegmentedScanHeader): the tree above over
// (head, value) pairs with the segmented operator, then, when exclusive, each value shifted to
// the next element of its segment (the identity at a segment's first element).
template <class T, class Op>
std::vector<T> SegmentedCanonicalRef(const std::vector<T>& x, const std::vector<uint8_t>& heads, bool exclusive) {
  using Item = seg::SegItem<T>;
  std::vector<Item> pairs(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) pairs[i] = seg::MakeItem<T>(x[i], i == 0 || heads[i] != 0 ? 1u : 0u);
  const std::vector<Item> scanned = CanonicalScanRef<Item, seg::SegOp<T, Op>>(pairs, false);
  std::vector<T> out(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    out[i] = !exclusive ? scanned[i].value : pairs[i].head ? Op::identity() : scanned[i - 1].value;
  }
  return out;
}

}  // namespace gpuscan::testing
