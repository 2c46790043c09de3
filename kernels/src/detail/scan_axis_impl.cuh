// Scans along one axis of a row-major matrix (gpuscan/kernels/scan_axis.h, issue 47).
//
// Three ways of walking the matrix. In the first two (AxisKernel) a block moves tiles of R rows
// x C columns through shared memory: a ring of kStages buffers, the next kStages - 1 tiles
// copying in (cp.async, 16 bytes an access where cols and the pointers allow it, else one
// element) while one is folded in place and stored out coalesced; the third (LookKernel) holds
// its tile in registers. DRAM traffic is one read and one write of the matrix (plus, for the
// look-back, a few values a column a band: aggregates, inclusive values, the ones walked).
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
//   kLook   (ScanColumns of integers and MIN/MAX when the 256-byte strips are fewer than the SMs,
//           e.g. 2^20 x 256): its own kernel, LookKernel. A tile is one band of G x R rows by cw
//           columns (cw the power of two >= cols, 32..256; G = 256 / cw row groups; R = 64 rows of
//           4-byte types, 32 of 8-byte ones), 256 threads, a thread a column and R rows of it held
//           in registers (loads and stores of 128 bytes a warp, no shared-memory ring). Tiles come
//           by ticket (an atomic counter, drawn only when the block is free to start the tile, so
//           a predecessor never waits in another block's queue), band-major. Per tile one status
//           word (flags[ctile][band]: 0, 1 aggregate, 2 inclusive); per column its aggregate
//           agg[band][col] and inclusive value inc[band][col], stored before the flag (block
//           barrier, then one thread's gpu-scope fence and flag store). A tile whose band above
//           is already inclusive (one acquire load, overlapped with its rows' loads) takes that
//           value; else it publishes its aggregate and warp 0 looks back CUB's way, 32 flags (one
//           128-byte line) a round, nearest first, to the nearest inclusive band with every band
//           between published; the block then folds those values, each column its own, and the
//           tile publishes its inclusive value before it scans its rows and stores them. Exact
//           only because these operators are associative in every order (integers wrap, MIN/MAX
//           pick; the identity starts band 0 without a carry); float SUM/PRODUCT never take it.
//           No deadlock: a tile waits only for lower tickets of running blocks. Temp: the flags
//           (zeroed each call) and two bands x cols arrays of values, not zeroed (32 MiB for
//           2^20 x 256 int32).
//
// Measured (H100, 2^28 int32, bench/results/scan-axis-h100-2026-11-27): rows 93.4% of copy at
// 2^20 x 256 and 92.2% at 2^14 x 2^14; strips 93.2% at 2^14 x 2^14; look-back 65.4% at 2^20 x 256
// (was 52% with one word a column and a copy ring; short of its 85% target). What limits it: a
// tile's walk is as long as the tiles that sit between "aggregate out" and "inclusive out" (rows
// a microsecond x that latency / R, ~50 bands at R = 64) and every band walked costs a value a
// column, cols x 4 bytes, against R x cols x 4 bytes of tile: the overhead falls as 1/R^2.
// Tried: R = 32 (32 KiB tiles, 4 blocks a SM) 27%; R = 64 (2 blocks a SM) 66%; a carry agent (the
// first ticket of each column tile folds all aggregates in order into a per-band prefix, tiles
// wait for its progress counter; no walks) 45%: each tile then waits through four dependent L2
// round trips and two fences with nothing else in flight on its block. What should work next:
// taller look-back units (R >= 128) with the next tile's loads in flight during the look-back
// (shared-memory staging beside the registers). Float SUM/PRODUCT at 2^20 x 256 run the narrow
// strips: 16 blocks, a strict chain of 2^20 dependent adds each (~2.1 ms at 1.98 GHz at best),
// 7.4 ms measured.
//
// Why not one kernel of square tiles both ways (as scan2d): an axis scan needs only one of the
// two folds, and a strip or row group that a block owns end to end needs no hand-off at all;
// look-back is there only for the one case that lacks parallelism across the matrix, few
// columns.
//
// The walks' kernels: agent_axis_tile.cuh (AxisKernel: kRows, kStrip), agent_axis_look.cuh
// (LookKernel: kLook).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "agent_axis_look.cuh"
#include "agent_axis_tile.cuh"
#include "device_facts.cuh"
#include "gpuscan/kernels/operators.h"
#include "gpuscan/kernels/scan_axis.h"

namespace gpuscan::kernels::axis_detail {

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
                   cudaStream_t stream) {
  const uint64_t bands = (rows + S::kR - 1) / S::kR, ctiles = (cols + S::kC - 1) / S::kC;
  if (bands >= 0xffffffffull || ctiles >= 0xffffffffull) return cudaErrorInvalidValue;
  uint64_t resident = 0;
  if (cudaError_t e = detail::ResidentBlocks<AxisKernel<T, Op, S>>(S::kThreads, int(S::kSmem), resident);
      e != cudaSuccess) {
    return e;
  }
  const uint64_t work = S::kMode == Walk::kRows ? bands : ctiles;
  const auto grid = static_cast<unsigned>(std::max<uint64_t>(1, std::min(work, resident)));
  AxisKernel<T, Op, S><<<grid, S::kThreads, S::kSmem, stream>>>(in, out, rows, cols, exclusive, carry_in, carry_out,
                                                                 uint32_t(bands), uint32_t(ctiles));
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
  // 4-byte types move 16 bytes an access where they can; 8-byte ones move 8 (one element), so
  // their vector kernels are not instantiated (compile time).
  if constexpr (sizeof(T) == 4) {
    if (WholeVectors<T>(cols, d_in, d_out)) {
      using S = Shape<Walk::kRows, T, 32, C, 4, 4>;
      return Launch<T, Op, S>(d_in, d_out, rows, cols, exclusive, nullptr, nullptr, stream);
    }
  }
  using S = Shape<Walk::kRows, T, 32, C, 1, 4>;
  return Launch<T, Op, S>(d_in, d_out, rows, cols, exclusive, nullptr, nullptr, stream);
}

// Float SUM and PRODUCT: only the strict top-to-bottom fold gives numpy's bits.
template <class T, class Op>
constexpr bool kStrict = std::is_floating_point_v<T> &&
                         (std::is_same_v<Op, ops::Sum<T>> || std::is_same_v<Op, ops::Product<T>>);
constexpr int kLookRows = 128;

// The look-back walk's layout in temp: the ticket counter, the flags (both zeroed each call),
// then the aggregates and the inclusive values, bands x cols each.
template <class T>
constexpr int kLookR = sizeof(T) == 4 ? 64 : 32;  // rows a thread holds: 64 KiB tiles at cw = 256
struct LookPlan {
  int cw_log2;
  uint64_t bands, ctiles;
  std::size_t flag_bytes, value_bytes, bytes;
};
template <class T>
LookPlan PlanLook(uint64_t rows, uint64_t cols) {
  LookPlan p{};
  p.cw_log2 = 5;
  while (p.cw_log2 < 8 && (uint64_t(1) << p.cw_log2) < cols) ++p.cw_log2;
  const uint64_t band_rows = uint64_t(kLookThreads >> p.cw_log2) * kLookR<T>;
  p.bands = (rows + band_rows - 1) / band_rows;
  p.ctiles = (cols + (uint64_t(1) << p.cw_log2) - 1) >> p.cw_log2;
  p.flag_bytes = 256 + AlignUp(p.bands * p.ctiles * sizeof(unsigned));
  p.value_bytes = AlignUp(p.bands * cols * sizeof(T));
  p.bytes = 256 + p.flag_bytes + 2 * p.value_bytes;
  return p;
}

template <class T, class Op, int R>
cudaError_t LaunchLook(const LookPlan& p, void* d_temp, const T* in, T* out, uint64_t rows, uint64_t cols,
                       bool exclusive, const T* carry_in, T* carry_out, cudaStream_t stream) {
  if (p.bands >= 0xffffffffull || p.ctiles >= 0xffffffffull) return cudaErrorInvalidValue;
  auto* base = reinterpret_cast<unsigned char*>(AlignUp(reinterpret_cast<std::size_t>(d_temp)));
  auto* counter = reinterpret_cast<unsigned long long*>(base);
  auto* flags = reinterpret_cast<unsigned*>(base + 256);
  auto* agg = reinterpret_cast<T*>(base + p.flag_bytes);
  auto* inc = reinterpret_cast<T*>(base + p.flag_bytes + p.value_bytes);
  if (cudaError_t e = cudaMemsetAsync(base, 0, p.flag_bytes, stream); e != cudaSuccess) return e;
  uint64_t resident = 0;
  if (cudaError_t e = detail::ResidentBlocks<LookKernel<T, Op, R>>(kLookThreads, 0, resident); e != cudaSuccess) {
    return e;
  }
  const auto grid = static_cast<unsigned>(std::max<uint64_t>(1, std::min(p.bands * p.ctiles, resident)));
  LookKernel<T, Op, R><<<grid, kLookThreads, 0, stream>>>(in, out, rows, cols, exclusive, carry_in, carry_out, flags,
                                                          agg, inc, counter, p.cw_log2, uint32_t(p.bands),
                                                          uint32_t(p.ctiles));
  return cudaGetLastError();
}

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
  LookPlan look{};
  std::size_t needed = kMinTemp;
  if (plan == ColumnPlan::kLook) {
    look = PlanLook<T>(rows, cols);
    needed = look.bytes;
  }
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
      return LaunchLook<T, Op, kLookR<T>>(look, d_temp, d_in, d_out, rows, cols, exclusive, d_carry_in, d_carry_out,
                                          stream);
    }
  } else if (plan == ColumnPlan::kNarrow) {
    if constexpr (kStrict<T, Op>) {
      constexpr int kNarrowCols = kNarrowBytes / int(sizeof(T));
      if constexpr (sizeof(T) == 4) {
        if (vec) {
          using S = Shape<Walk::kStrip, T, kNarrowRows, kNarrowCols, 4, 3, 128>;
          return Launch<T, Op, S>(d_in, d_out, rows, cols, exclusive, d_carry_in, d_carry_out, stream);
        }
      }
      using S = Shape<Walk::kStrip, T, kNarrowRows, kNarrowCols, 1, 3, 128>;
      return Launch<T, Op, S>(d_in, d_out, rows, cols, exclusive, d_carry_in, d_carry_out, stream);
    }
  }
  if constexpr (sizeof(T) == 4) {
    if (vec) {
      using S = Shape<Walk::kStrip, T, 64, C, 4, 4>;
      return Launch<T, Op, S>(d_in, d_out, rows, cols, exclusive, d_carry_in, d_carry_out, stream);
    }
  }
  using S = Shape<Walk::kStrip, T, 64, C, 1, 4>;
  return Launch<T, Op, S>(d_in, d_out, rows, cols, exclusive, d_carry_in, d_carry_out, stream);
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
