// The axis scan's tiled walks (scan_axis_impl.cuh, kRows and kStrip): AxisKernel moves tiles of
// R rows x C columns through a ring of shared-memory buffers (cp.async) and folds them in place.
#pragma once

#include <cuda_pipeline.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "gpuscan/kernels/operators.h"

namespace gpuscan::kernels::axis_detail {

enum class Walk { kRows, kStrip };

// R rows x C columns a tile, V elements an access (1: element by element), kStages buffers.
// kMinThreads: more threads than rows (columns) to copy the tiles in and out (narrow strips).
template <Walk kWalk, class T, int R, int C, int V, int kStages, int kMinThreads = 0>
struct Shape {
  static constexpr Walk kMode = kWalk;
  static constexpr int kR = R, kC = C, kV = V, kS = kStages;
  // A thread a row / a column folds; every thread copies.
  static constexpr int kThreads = std::max(kWalk == Walk::kRows ? R : C, kMinThreads);
  // Rows mode: padded rows (bank conflicts of the row walk); columns: consecutive threads read
  // consecutive words, no padding needed.
  static constexpr int kWidth = kWalk == Walk::kRows ? C + V : C;
  static constexpr std::size_t kTileBytes = std::size_t(R) * kWidth * sizeof(T);
  static constexpr std::size_t kSmem = kStages * kTileBytes;
  static_assert(C % V == 0 && (kWidth * sizeof(T)) % (V * sizeof(T)) == 0, "rows of whole vectors");
};

template <class T, int V>
struct alignas(sizeof(T) * V) Vec {
  T e[V];
};

// A tile in tile units: band (row group) and column tile (strip); band == ~0u: none.
struct TileRef {
  uint32_t band, ctile;
};

template <class T, class Op, class S>
__global__ void __launch_bounds__(S::kThreads)
    AxisKernel(const T* in, T* out, uint64_t rows, uint64_t cols, bool exclusive, const T* carry_in, T* carry_out,
               uint32_t bands, uint32_t ctiles) {
  constexpr int R = S::kR, C = S::kC, V = S::kV, kStages = S::kS, N = S::kThreads, W = S::kWidth;
  constexpr int kVecs = C / V;  // vectors a tile row
  // Rows a column fold reads into registers at once: shared loads issued together, not one
  // load-op-store round trip a row (that ran at ~36 cycles a row, 2^20 x 256 float: 19 ms).
  constexpr int kBatch = 16;
  static_assert(R % kBatch == 0, "whole batches");
  using VecT = Vec<T, V>;
  extern __shared__ __align__(16) unsigned char smem[];
  const int tid = threadIdx.x;
  const Op op;
  auto buffer = [&](uint64_t k) { return reinterpret_cast<T*>(smem) + (k % kStages) * (R * W); };
  auto height = [&](uint32_t b) { return static_cast<int>(min(uint64_t(R), rows - uint64_t(b) * R)); };
  auto width = [&](uint32_t c) { return static_cast<int>(min(uint64_t(C), cols - uint64_t(c) * C)); };

  // Static walks: rows owns row groups (band = group, ctile walks), strip owns strips (ctile =
  // strip, band walks). A cursor steps through the block's tiles without a division.
  const uint32_t units = S::kMode == Walk::kRows ? bands : ctiles;
  const uint32_t per = S::kMode == Walk::kRows ? ctiles : bands;
  struct Cursor {
    uint32_t unit, pos;
  };
  auto ref_of = [&](Cursor c) -> TileRef {
    if (c.unit >= units) return TileRef{~0u, 0};
    return S::kMode == Walk::kRows ? TileRef{c.unit, c.pos} : TileRef{c.pos, c.unit};
  };
  auto advance = [&](Cursor& c) {
    if (++c.pos == per) {
      c.pos = 0;
      c.unit += gridDim.x;
    }
  };

  auto load = [&](uint64_t k, TileRef t) {
    if (t.band != ~0u) {
      T* buf = buffer(k);
      const int nr = height(t.band), nc = width(t.ctile);
      const T* src = in + uint64_t(t.band) * R * cols + uint64_t(t.ctile) * C;
      if (nr == R && nc == C) {
        static_assert((R * kVecs) % N == 0, "the block covers whole tiles");
#pragma unroll 8
        for (int e = tid; e < R * kVecs; e += N) {
          const int r = e / kVecs, j = e % kVecs * V;
          __pipeline_memcpy_async(buf + r * W + j, src + uint64_t(r) * cols + j, sizeof(VecT));
        }
      } else {
        for (int e = tid; e < nr * kVecs; e += N) {
          const int r = e / kVecs, j = e % kVecs * V;
          if (j < nc) __pipeline_memcpy_async(buf + r * W + j, src + uint64_t(r) * cols + j, sizeof(VecT));
        }
      }
    }
    __pipeline_commit();  // empty past the last tile: the waits stay uniform
  };
  auto store = [&](uint64_t k, TileRef t) {
    const T* buf = buffer(k);
    const int nr = height(t.band), nc = width(t.ctile);
    T* dst = out + uint64_t(t.band) * R * cols + uint64_t(t.ctile) * C;
    if (nr == R && nc == C) {
#pragma unroll 8
      for (int e = tid; e < R * kVecs; e += N) {
        const int r = e / kVecs, j = e % kVecs * V;
        *reinterpret_cast<VecT*>(dst + uint64_t(r) * cols + j) = *reinterpret_cast<const VecT*>(buf + r * W + j);
      }
    } else {
      for (int e = tid; e < nr * kVecs; e += N) {
        const int r = e / kVecs, j = e % kVecs * V;
        if (j < nc) {
          *reinterpret_cast<VecT*>(dst + uint64_t(r) * cols + j) = *reinterpret_cast<const VecT*>(buf + r * W + j);
        }
      }
    }
  };

  Cursor load_at{blockIdx.x, 0}, fold_at{blockIdx.x, 0};
  for (int i = 0; i < kStages - 1; ++i) {
    load(i, ref_of(load_at));
    advance(load_at);
  }

  T acc{};  // the fold of this thread's row (column) so far
  for (uint64_t k = 0;; ++k) {
    __pipeline_wait_prior(kStages - 2);  // tile k has landed (this thread's copies)
    __syncthreads();                     // everyone's; tile k - 1's stores are done
    const TileRef cur = ref_of(fold_at);
    if (cur.band == ~0u) break;
    load(k + kStages - 1, ref_of(load_at));
    advance(load_at);
    T* buf = buffer(k);
    const int nr = height(cur.band), nc = width(cur.ctile);

    // The fold, inclusive or exclusive (a template constant: two copies of the loops only).
    auto fold_tile = [&](auto excl) {
      constexpr bool kExcl = decltype(excl)::value;
      // x -> its output; acc holds the fold so far.
      auto step = [&](T& x) {
        const T y = x;
        if constexpr (kExcl) {
          x = acc;
          acc = op(acc, y);
        } else {
          x = acc = op(acc, y);
        }
      };
      auto first = [&](T& x) {  // the first element of a row / column without a carry
        acc = x;
        if constexpr (kExcl) x = Op::identity();
      };
      if constexpr (S::kMode == Walk::kRows) {
        if (tid < nr) {
          T* row = buf + tid * W;
          int j = 0;
          if (cur.ctile == 0) {
            first(row[0]);
            j = 1;
          }
          if constexpr (V > 1) {
            auto* vrow = reinterpret_cast<VecT*>(row);
            int q = 0;
            if (j == 1) {  // the rest of the first vector
              VecT v = vrow[0];
#pragma unroll
              for (int x = 1; x < V; ++x) step(v.e[x]);
              vrow[0] = v;
              q = 1;
            }
            if (q == 0 && nc == C) {  // kBatch vectors read, folded, written back at once
              constexpr int kBatch = kVecs % 4 == 0 ? 4 : 1;
#pragma unroll 2
              for (int i = 0; i < kVecs; i += kBatch) {
                VecT v[kBatch];
#pragma unroll
                for (int u = 0; u < kBatch; ++u) v[u] = vrow[i + u];
#pragma unroll
                for (int u = 0; u < kBatch; ++u) {
#pragma unroll
                  for (int x = 0; x < V; ++x) step(v[u].e[x]);
                }
#pragma unroll
                for (int u = 0; u < kBatch; ++u) vrow[i + u] = v[u];
              }
            } else {
              for (; q < nc / V; ++q) {
                VecT v = vrow[q];
#pragma unroll
                for (int x = 0; x < V; ++x) step(v.e[x]);
                vrow[q] = v;
              }
            }
          } else {
            if (j == 0 && nc == C) {
              static_assert(C % 16 == 0, "whole batches");
#pragma unroll 1
              for (int i = 0; i < C; i += 16) {
                T v[16];
#pragma unroll
                for (int u = 0; u < 16; ++u) v[u] = row[i + u];
#pragma unroll
                for (int u = 0; u < 16; ++u) step(v[u]);
#pragma unroll
                for (int u = 0; u < 16; ++u) row[i + u] = v[u];
              }
            } else {
              for (; j < nc; ++j) step(row[j]);
            }
          }
        }
      } else if (tid < nc) {  // a thread a column, top to bottom
        const uint64_t col = uint64_t(cur.ctile) * C + tid;
        T* x = buf + tid;
        int r = 0;
        if (cur.band == 0) {
          if (carry_in) {
            acc = carry_in[col];
          } else {
            first(x[0]);
            r = 1;
          }
        }  // kStrip: acc goes on from the band above, in this thread's register
        if (r == 0 && nr == R) {  // kBatch rows read into registers at once, folded, written back
#pragma unroll 1
          for (int i = 0; i < R; i += kBatch) {
            T v[kBatch];
#pragma unroll
            for (int u = 0; u < kBatch; ++u) v[u] = x[(i + u) * W];
#pragma unroll
            for (int u = 0; u < kBatch; ++u) step(v[u]);
#pragma unroll
            for (int u = 0; u < kBatch; ++u) x[(i + u) * W] = v[u];
          }
        } else {
          for (; r < nr; ++r) step(x[r * W]);
        }
        if (carry_out && cur.band + 1u == bands) carry_out[col] = acc;
      }
    };
    if (exclusive) {
      fold_tile(std::true_type{});
    } else {
      fold_tile(std::false_type{});
    }
    __syncthreads();  // the tile is folded
    store(k, cur);
    advance(fold_at);
  }
}

}  // namespace gpuscan::kernels::axis_detail
