// Scans along one axis of a row-major matrix (gpuscan/kernels/scan_axis.h, issue 47).
//
// One kernel, three ways of walking the matrix. In all three a block moves tiles of R rows x C
// columns through shared memory: a ring of kStages buffers, the next kStages - 1 tiles copying
// in (cp.async, 16 bytes an access where cols and the pointers allow it, else one element) while
// one is folded in place and stored out coalesced. DRAM traffic is one read and one write of the
// matrix (plus, for the look-back walk, 8 or 16 bytes a column a band of R rows).
//
//   kRows   (ScanRows): a thread per row, R = 32 rows a block, tiles of 256 bytes of each row
//           walked left to right with the row's fold in a register. No block talks to another.
//           Row groups are dealt to the blocks statically (group blockIdx.x + i * gridDim.x);
//           32 rows a block keeps a 2^14-row matrix at 512 groups, all resident at once (a
//           DRAM-bound grid whose blocks all have equal work ends together), and a 2^20-row one
//           at ~40 groups a block. Shared rows are padded by one vector (a quarter-warp's 16-byte
//           reads of 8 rows then cover the 32 banks once).
//   kStrip  (ScanColumns, wide matrices and strict float folds): a thread per column, a block
//           owns a strip of C columns (256 bytes) and walks it top to bottom, the column folds in
//           registers: again no communication, and every column is folded strictly in order.
//   kLook   (ScanColumns of integers and MIN/MAX when the strips are fewer than the SMs, e.g.
//           2^20 x 256): tiles of 128 rows x C columns (64 threads, 3 stages, two blocks a SM)
//           are taken by tickets from an atomic
//           counter in band-major order; each column of a tile reduces its rows, publishes the
//           aggregate (flag 1) in its word, looks back over the words of the bands above (8 of
//           them loaded at once a round, until an inclusive one, flag 2), publishes its
//           inclusive value and folds its rows from that prefix. A column whose band above is
//           already inclusive skips the aggregate pass (it is the chained hand-off). Exact only
//           because these operators are associative in every order (integers wrap, MIN/MAX
//           pick); float SUM/PRODUCT never take this path.
//           No deadlock: a tile waits only for lower tickets, and the lowest unfinished ticket
//           belongs to a running block whose earlier tickets are done.
//           Words: {flag, value} in one 8-byte word (4-byte types) or a 16-byte TileWord
//           (tile_state.cuh), written and read whole (relaxed, gpu scope), so a value never
//           travels apart from its flag and no fence is needed. They are zeroed by a memset
//           each call: bands x cols words (16 MiB for 2^20 x 256 int32).
//
// Measured (H100, 2^28 int32, bench/results/scan-axis-h100-2026-11-27): rows 93.6% of copy at
// 2^20 x 256 and 91.5% at 2^14 x 2^14 (1.27x / 1.24x CUB's scan by row keys); strips 92.8% at
// 2^14 x 2^14; look-back only 52% at 2^20 x 256 (short of its 85% target). What limits it (not
// yet fixed): every column of a tile walks its own words, so a block polls 64 words a band back
// (8 a round) and the ~130 bands of a strip in flight keep the walks long; and tickets drawn
// three tiles ahead (for the copy ring) put a tile's predecessor behind other tiles in another
// block's queue. Batching the column folds (loads hoisted into registers) changed nothing; a
// 32-word window made it 19%. The next step would be one flag word a tile (CUB-style warp
// look-back over tiles, then each column reads only the values it folds) and tickets drawn as
// late as the ring allows. Float SUM/PRODUCT at 2^20 x 256 run the narrow strips: 16 blocks, a
// strict chain of 2^20 dependent adds each (~2.1 ms at 1.98 GHz at best), 7.4 ms measured.
//
// Why not one kernel of square tiles both ways (as scan2d): an axis scan needs only one of the
// two folds, and a strip or row group that a block owns end to end needs no hand-off at all;
// look-back is there only for the one case that lacks parallelism across the matrix, few
// columns.
//
// Polls are bounded (~2^23 tries): a word that never comes ends in a message and a trap instead
// of a hung stream.
#pragma once

#include <cuda_pipeline.h>
#include <cuda_runtime.h>

#include <cstdio>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "gpuscan/kernels/operators.h"
#include "gpuscan/kernels/scan_axis.h"
#include "device_facts.cuh"
#include "tile_state.cuh"

namespace gpuscan::kernels::axis_detail {

using detail::TileWord;

enum class Walk { kRows, kStrip, kLook };

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

// The look-back words: 4-byte values share one 8-byte word with their flag, 8-byte ones a
// TileWord.
template <class T>
using Word = std::conditional_t<sizeof(T) == 4, unsigned long long, TileWord>;
enum : unsigned { kNone = 0, kAggregate = 1, kInclusive = 2 };

template <class T>
__device__ __forceinline__ void Publish(Word<T>* p, unsigned flag, T v) {
  if constexpr (sizeof(T) == 4) {
    const unsigned long long w = (static_cast<unsigned long long>(flag) << 32) | detail::ToBits(v);
    asm volatile("st.relaxed.gpu.global.u64 [%0], %1;" ::"l"(p), "l"(w) : "memory");
  } else {
    detail::StoreTileWord(p, flag, detail::ToBits(v));
  }
}

template <class T>
__device__ __forceinline__ unsigned Peek(const Word<T>* p, T& v) {
  if constexpr (sizeof(T) == 4) {
    unsigned long long w;
    asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(w) : "l"(p) : "memory");
    v = detail::FromBits<T>(w & 0xffffffffull);
    return static_cast<unsigned>(w >> 32);
  } else {
    unsigned long long status, bits;
    detail::LoadTileWord(p, status, bits);
    v = detail::FromBits<T>(bits);
    return static_cast<unsigned>(status);
  }
}

constexpr uint32_t kMaxSpins = 1u << 23;
static __device__ __noinline__ void GiveUp(uint64_t band, uint64_t col, uint64_t waiting_for) {
  printf("gpuscan scan_axis: band %llu column %llu (block %u thread %u): the word of band %llu never came\n",
         static_cast<unsigned long long>(band), static_cast<unsigned long long>(col), blockIdx.x, threadIdx.x,
         static_cast<unsigned long long>(waiting_for));
  __trap();
}

// The prefix of column `col` over bands 0..b-1 (b > 0): kWindow words of the bands above read at
// once, folded from the nearest down to the first inclusive one.
template <class T, class Op>
__device__ __forceinline__ T LookBack(const Word<T>* words, uint64_t cols, uint64_t col, uint64_t b) {
  // Measured at 2^20 x 256 int32 (H100): 8 words a round 52% of copy, 32 words 19% (every
  // column of a tile polls its own window: 64 x 32 loads a spin a block swamp the L2).
  constexpr int kWindow = 8;
  const Op op;
  T prefix{};
  bool have = false;
  uint64_t next = b - 1;  // the nearest band not yet folded in
  for (uint32_t spins = 0;; ++spins) {
    unsigned flag[kWindow];
    T value[kWindow];
#pragma unroll
    for (int i = 0; i < kWindow; ++i) {
      flag[i] = kNone;
      if (next >= uint64_t(i)) flag[i] = Peek<T>(words + (next - i) * cols + col, value[i]);
    }
    int used = 0;
    bool done = false;
#pragma unroll
    for (int i = 0; i < kWindow; ++i) {
      if (!done && used == i && flag[i] != kNone) {
        prefix = have ? op(value[i], prefix) : value[i];
        have = true;
        used = i + 1;
        done = flag[i] == kInclusive;
      }
    }
    if (done) return prefix;
    next -= used;
    if (used == 0) {
      if (spins >= 4) __nanosleep(64);
      if (spins >= kMaxSpins) GiveUp(b, col, next);
    }
  }
}

// A tile in tile units: band (row group) and column tile (strip); band == ~0u: none.
struct TileRef {
  uint32_t band, ctile;
};

template <class T, class Op, class S>
__global__ void __launch_bounds__(S::kThreads)
    AxisKernel(const T* in, T* out, uint64_t rows, uint64_t cols, bool exclusive, const T* carry_in, T* carry_out,
               Word<T>* words, unsigned long long* counter, uint32_t bands, uint32_t ctiles) {
  constexpr int R = S::kR, C = S::kC, V = S::kV, kStages = S::kS, N = S::kThreads, W = S::kWidth;
  constexpr int kVecs = C / V;  // vectors a tile row
  // Rows a column fold reads into registers at once: shared loads issued together, not one
  // load-op-store round trip a row (that ran at ~36 cycles a row, 2^20 x 256 float: 19 ms).
  constexpr int kBatch = 16;
  static_assert(R % kBatch == 0, "whole batches");
  using VecT = Vec<T, V>;
  extern __shared__ __align__(16) unsigned char smem[];
  __shared__ TileRef s_ring[kStages + 1];  // kLook: the tiles of tickets k .. k + kStages
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
  auto ticket_ref = [&](unsigned long long t) -> TileRef {
    if (t >= uint64_t(bands) * ctiles) return TileRef{~0u, 0};
    return TileRef{static_cast<uint32_t>(t / ctiles), static_cast<uint32_t>(t % ctiles)};
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
  unsigned long long ahead = 0;  // kLook: thread 0's ticket for tile k + kStages
  if constexpr (S::kMode == Walk::kLook) {
    if (tid == 0) {
      for (int i = 0; i < kStages; ++i) s_ring[i] = ticket_ref(atomicAdd(counter, 1ull));
    }
    __syncthreads();
  }
  for (int i = 0; i < kStages - 1; ++i) {
    if constexpr (S::kMode == Walk::kLook) {
      load(i, s_ring[i]);
    } else {
      load(i, ref_of(load_at));
      advance(load_at);
    }
  }

  T acc{};  // the fold of this thread's row (column) so far
  for (uint64_t k = 0;; ++k) {
    __pipeline_wait_prior(kStages - 2);  // tile k has landed (this thread's copies)
    __syncthreads();                     // everyone's; tile k - 1's stores are done
    TileRef cur;
    if constexpr (S::kMode == Walk::kLook) {
      cur = s_ring[k % (kStages + 1)];
      if (cur.band == ~0u) break;
      load(k + kStages - 1, s_ring[(k + kStages - 1) % (kStages + 1)]);
      if (tid == 0) ahead = atomicAdd(counter, 1ull);  // its round trip overlaps the fold
    } else {
      cur = ref_of(fold_at);
      if (cur.band == ~0u) break;
      load(k + kStages - 1, ref_of(load_at));
      advance(load_at);
    }
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
        bool publish = false;
        if (cur.band == 0) {
          if (carry_in) {
            acc = carry_in[col];
          } else {
            first(x[0]);
            r = 1;
          }
        } else if constexpr (S::kMode == Walk::kLook) {
          Word<T>* above = words + (uint64_t(cur.band) - 1) * cols + col;
          T prefix;
          if (Peek<T>(above, prefix) != kInclusive) {  // not there yet: aggregate, then look back
            T agg = x[0];
            if (nr == R) {
#pragma unroll 1
              for (int i = 0; i < R; i += kBatch) {
                T v[kBatch];
#pragma unroll
                for (int u = 0; u < kBatch; ++u) v[u] = x[(i + u) * W];
#pragma unroll
                for (int u = 0; u < kBatch; ++u) {
                  if (i + u > 0) agg = op(agg, v[u]);
                }
              }
            } else {
              for (int i = 1; i < nr; ++i) agg = op(agg, x[i * W]);
            }
            Publish<T>(words + uint64_t(cur.band) * cols + col, kAggregate, agg);
            prefix = LookBack<T, Op>(words, cols, col, cur.band);
          }
          acc = prefix;
        }  // kStrip: acc goes on from the band above, in this thread's register
        if constexpr (S::kMode == Walk::kLook) publish = cur.band + 1u < bands;
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
        if (publish) Publish<T>(words + uint64_t(cur.band) * cols + col, kInclusive, acc);
        if (carry_out && cur.band + 1u == bands) carry_out[col] = acc;
      }
    };
    if (exclusive) {
      fold_tile(std::true_type{});
    } else {
      fold_tile(std::false_type{});
    }
    __syncwarp();     // the look-back polls diverge: reconverge before the block's barrier
    __syncthreads();  // the tile is folded
    store(k, cur);
    if constexpr (S::kMode == Walk::kLook) {
      if (tid == 0) s_ring[(k + kStages) % (kStages + 1)] = ticket_ref(ahead);
    } else {
      advance(fold_at);
    }
  }
}

// out[j] = carry ? carry[j] : identity (ScanColumns of zero rows).
template <class T, class Op>
__global__ void CarryThrough(const T* carry_in, T* carry_out, uint64_t cols) {
  for (uint64_t j = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; j < cols; j += uint64_t(gridDim.x) * blockDim.x) {
    carry_out[j] = carry_in ? carry_in[j] : Op::identity();
  }
}

inline std::size_t AlignUp(std::size_t x) { return (x + 255) & ~std::size_t(255); }
constexpr std::size_t kMinTemp = 256;  // never 0: a null d_temp with 0 bytes would read as a query

inline cudaError_t SmCount(int& sms) {
  static std::atomic<int> known[detail::kKeptDevices] = {};
  return detail::KeptForDevice(known, sms, [](int device, int& value) {
    return cudaDeviceGetAttribute(&value, cudaDevAttrMultiProcessorCount, device);
  });
}

template <class T, class Op, class S>
cudaError_t Launch(const T* in, T* out, uint64_t rows, uint64_t cols, bool exclusive, const T* carry_in, T* carry_out,
                   Word<T>* words, unsigned long long* counter, cudaStream_t stream) {
  const uint64_t bands = (rows + S::kR - 1) / S::kR, ctiles = (cols + S::kC - 1) / S::kC;
  if (bands >= 0xffffffffull || ctiles >= 0xffffffffull) return cudaErrorInvalidValue;
  uint64_t resident = 0;
  if (cudaError_t e = detail::ResidentBlocks<AxisKernel<T, Op, S>>(S::kThreads, int(S::kSmem), resident);
      e != cudaSuccess) {
    return e;
  }
  const uint64_t work = S::kMode == Walk::kRows ? bands : S::kMode == Walk::kStrip ? ctiles : bands * ctiles;
  const auto grid = static_cast<unsigned>(std::max<uint64_t>(1, std::min(work, resident)));
  AxisKernel<T, Op, S><<<grid, S::kThreads, S::kSmem, stream>>>(in, out, rows, cols, exclusive, carry_in, carry_out,
                                                                 words, counter, uint32_t(bands), uint32_t(ctiles));
  return cudaGetLastError();
}

constexpr int kRowBytes = 256;  // a tile row: 256 bytes of the matrix row

template <class T>
bool WholeVectors(uint64_t cols, const void* a, const void* b) {
  return sizeof(T) == 4 && cols % 4 == 0 && reinterpret_cast<std::uintptr_t>(a) % 16 == 0 &&
         reinterpret_cast<std::uintptr_t>(b) % 16 == 0;
}

template <class T, class Op>
cudaError_t ScanRows(void* d_temp, std::size_t& temp_bytes, const T* d_in, T* d_out, uint64_t rows, uint64_t cols,
                     bool exclusive, cudaStream_t stream) {
  if (!d_temp) {
    temp_bytes = kMinTemp;
    return cudaSuccess;
  }
  if (rows == 0 || cols == 0) return cudaSuccess;
  constexpr int C = kRowBytes / int(sizeof(T));
  // 4-byte types move 16 bytes an access where they can; 8-byte ones move 8 (one element).
  if (WholeVectors<T>(cols, d_in, d_out)) {
    using S = Shape<Walk::kRows, T, 32, C, 4, 4>;
    return Launch<T, Op, S>(d_in, d_out, rows, cols, exclusive, nullptr, nullptr, nullptr, nullptr, stream);
  }
  using S = Shape<Walk::kRows, T, 32, C, 1, 4>;
  return Launch<T, Op, S>(d_in, d_out, rows, cols, exclusive, nullptr, nullptr, nullptr, nullptr, stream);
}

// Float SUM and PRODUCT: only the strict top-to-bottom fold gives numpy's bits.
template <class T, class Op>
constexpr bool kStrict = std::is_floating_point_v<T> &&
                         (std::is_same_v<Op, ops::Sum<T>> || std::is_same_v<Op, ops::Product<T>>);
constexpr int kLookRows = 128;

// The walk ScanColumns takes: look-back for exact operators when the strips are fewer than the
// SMs (and there is more than one band); for strict folds with few strips, narrow strips (64
// bytes of each row, 1024-row tiles, 3 stages: 2^20 x 256 float is 16 blocks, each streaming its
// columns alone at the pace of one dependent add a row); else strips of 64-row tiles.
enum class ColumnPlan { kStrip64, kNarrow, kLook };
constexpr int kNarrowBytes = 64, kNarrowRows = 1024;

template <class T, class Op>
cudaError_t PlanColumns(uint64_t rows, uint64_t cols, ColumnPlan& plan) {
  constexpr int C = kRowBytes / int(sizeof(T));
  int sms = 0;
  if (cudaError_t e = SmCount(sms); e != cudaSuccess) return e;
  const uint64_t strips = (cols + C - 1) / C;
  plan = ColumnPlan::kStrip64;
  if (strips < uint64_t(sms)) {
    if constexpr (kStrict<T, Op>) {
      plan = ColumnPlan::kNarrow;
    } else {
      if (rows > uint64_t(kLookRows)) plan = ColumnPlan::kLook;
    }
  }
  return cudaSuccess;
}

template <class T, class Op>
cudaError_t ScanColumns(void* d_temp, std::size_t& temp_bytes, const T* d_in, T* d_out, uint64_t rows, uint64_t cols,
                        bool exclusive, const T* d_carry_in, T* d_carry_out, cudaStream_t stream) {
  constexpr int C = kRowBytes / int(sizeof(T));
  ColumnPlan plan = ColumnPlan::kStrip64;
  if (cols > 0 && rows > 0) {
    if (cudaError_t e = PlanColumns<T, Op>(rows, cols, plan); e != cudaSuccess) return e;
  }
  const uint64_t bands = (rows + kLookRows - 1) / kLookRows;
  const std::size_t word_bytes = plan == ColumnPlan::kLook ? bands * cols * sizeof(Word<T>) : 0;
  const std::size_t zeroed = plan == ColumnPlan::kLook ? 256 + AlignUp(word_bytes) : 0;
  const std::size_t needed = std::max(kMinTemp, zeroed + 256);
  if (!d_temp) {
    temp_bytes = needed;
    return cudaSuccess;
  }
  if (temp_bytes < needed) return cudaErrorInvalidValue;
  if (cols == 0) return cudaSuccess;
  if (rows == 0) {
    if (!d_carry_out) return cudaSuccess;
    const auto blocks = static_cast<unsigned>(std::min<uint64_t>((cols + 255) / 256, 1024));
    CarryThrough<T, Op><<<blocks, 256, 0, stream>>>(d_carry_in, d_carry_out, cols);
    return cudaGetLastError();
  }
  const bool vec = WholeVectors<T>(cols, d_in, d_out);
  if (plan == ColumnPlan::kLook) {
    if constexpr (!kStrict<T, Op>) {
      auto* base = reinterpret_cast<unsigned char*>(AlignUp(reinterpret_cast<std::size_t>(d_temp)));
      auto* counter = reinterpret_cast<unsigned long long*>(base);
      auto* words = reinterpret_cast<Word<T>*>(base + 256);
      if (cudaError_t e = cudaMemsetAsync(base, 0, zeroed, stream); e != cudaSuccess) return e;
      if (vec) {
        using S = Shape<Walk::kLook, T, kLookRows, C, 4, 3>;
        return Launch<T, Op, S>(d_in, d_out, rows, cols, exclusive, d_carry_in, d_carry_out, words, counter, stream);
      }
      using S = Shape<Walk::kLook, T, kLookRows, C, 1, 3>;
      return Launch<T, Op, S>(d_in, d_out, rows, cols, exclusive, d_carry_in, d_carry_out, words, counter, stream);
    }
  } else if (plan == ColumnPlan::kNarrow) {
    if constexpr (kStrict<T, Op>) {
      constexpr int kNarrowCols = kNarrowBytes / int(sizeof(T));
      if (vec) {
        using S = Shape<Walk::kStrip, T, kNarrowRows, kNarrowCols, 4, 3, 128>;
        return Launch<T, Op, S>(d_in, d_out, rows, cols, exclusive, d_carry_in, d_carry_out, nullptr, nullptr, stream);
      }
      using S = Shape<Walk::kStrip, T, kNarrowRows, kNarrowCols, 1, 3, 128>;
      return Launch<T, Op, S>(d_in, d_out, rows, cols, exclusive, d_carry_in, d_carry_out, nullptr, nullptr, stream);
    }
  }
  if (vec) {
    using S = Shape<Walk::kStrip, T, 64, C, 4, 4>;
    return Launch<T, Op, S>(d_in, d_out, rows, cols, exclusive, d_carry_in, d_carry_out, nullptr, nullptr, stream);
  }
  using S = Shape<Walk::kStrip, T, 64, C, 1, 4>;
  return Launch<T, Op, S>(d_in, d_out, rows, cols, exclusive, d_carry_in, d_carry_out, nullptr, nullptr, stream);
}

}  // namespace gpuscan::kernels::axis_detail

template <class T, class Op>
cudaError_t gpuscan::kernels::ScanRows(void* d_temp, std::size_t& temp_bytes, const T* d_in, T* d_out, uint64_t rows,
                                       uint64_t cols, bool exclusive, cudaStream_t stream) {
  return axis_detail::ScanRows<T, Op>(d_temp, temp_bytes, d_in, d_out, rows, cols, exclusive, stream);
}

template <class T, class Op>
cudaError_t gpuscan::kernels::ScanColumns(void* d_temp, std::size_t& temp_bytes, const T* d_in, T* d_out,
                                          uint64_t rows, uint64_t cols, bool exclusive, const T* d_carry_in,
                                          T* d_carry_out, cudaStream_t stream) {
  return axis_detail::ScanColumns<T, Op>(d_temp, temp_bytes, d_in, d_out, rows, cols, exclusive, d_carry_in,
                                         d_carry_out, stream);
}

#define GPUSCAN_INSTANTIATE_SCAN_AXIS(T, OP)                                                                     \
  template cudaError_t gpuscan::kernels::ScanRows<T, gpuscan::ops::OP<T>>(void*, std::size_t&, const T*, T*,     \
                                                                          uint64_t, uint64_t, bool, cudaStream_t); \
  template cudaError_t gpuscan::kernels::ScanColumns<T, gpuscan::ops::OP<T>>(                                    \
      void*, std::size_t&, const T*, T*, uint64_t, uint64_t, bool, const T*, T*, cudaStream_t);
