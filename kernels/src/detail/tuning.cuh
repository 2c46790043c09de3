// Tuning as plain data: threads per block and items per thread, per architecture and element
// size. Only sm_90 (H100/H200) is tuned; other architectures take the same numbers.
// The figures that justified each choice are in the comments: bench/tune/tune_bench.cu and the
// kernel suite (bench/) on H100s and H200s, CUDA 13.0, their outputs in bench/results/ (the
// oldest, 2026-11-22, by kernel_bench, since folded into them: tuning-h100-2026-11-22/).
#pragma once

#include <cstdint>
#include <type_traits>

namespace gpuscan::kernels::detail {

// Cache behaviour of a 16-byte load (striped.cuh LoadVec): kDefault (ld.global), kNc
// (ld.global.nc, the read-only path), kStream (ld.global.cs, evict first: data read once).
enum class LoadHint { kDefault, kNc, kStream };

// A look-back's sleeps when they are chosen at launch (tile_state.cuh LookBackWith); 0: none.
struct LookBackDelays {
  int first_ns = 0, poll_ns = 0;
};

template <int kThreads_, int kItems_>
struct TilePolicy {
  static constexpr int kThreads = kThreads_;
  static constexpr int kItems = kItems_;
  static constexpr int kTile = kThreads_ * kItems_;
};

// Single-pass scan: also how a tile is laid out over the threads and how the look-back waits.
//   kStriped: each warp loads its 32 * kItems elements as 16-byte vectors, lane-interleaved
//             (fully coalesced); false: each thread loads kItems consecutive elements.
//   kFirstDelayNs / kPollDelayNs: look-back sleeps (tile_state.cuh), for grids of >= 500 tiles.
//   kDelayMinTiles: launches of fewer tiles poll without sleeping (latency is all that matters).
//   kMinBlocks: blocks a SM the kernel is compiled to fit (its registers capped so they do; 0:
//               none). 0 leaves __launch_bounds__' second argument unset; 1 is not the same:
//               with 1, ptxas gave the reduce by key kernel 77 registers instead of 62 (8 blocks a
//               SM -> 6) and it ran 13% slower (2026-11-25).
template <int kThreads_, int kItems_, bool kStriped_, int kFirstDelayNs_, int kPollDelayNs_,
          int kDelayMinTiles_ = 500, int kMinBlocks_ = 0>
struct SinglePassPolicy : TilePolicy<kThreads_, kItems_> {
  static constexpr bool kStriped = kStriped_;
  static constexpr int kFirstDelayNs = kFirstDelayNs_;
  static constexpr int kPollDelayNs = kPollDelayNs_;
  static constexpr uint32_t kDelayMinTiles = kDelayMinTiles_;
  static constexpr int kMinBlocks = kMinBlocks_;
};

// Reduce: striped 16-byte loads (always; the unaligned case loads the same elements one by one,
// so the association never depends on the address), at most kMaxBlocks blocks (a constant, not
// the device's SM count, so the association depends on n alone).
//   kGridStride: block b takes tiles b, b + blocks, ... (false: an even share of consecutive
//                tiles). kUnroll: tiles whose loads are issued before any is combined.
//   kHint: the loads' cache behaviour (striped.cuh LoadHint).
template <int kThreads_, int kItems_, int kMaxBlocks_, bool kGridStride_, int kUnroll_, LoadHint kHint_>
struct ReducePolicy : TilePolicy<kThreads_, kItems_> {
  static constexpr int kMaxBlocks = kMaxBlocks_;
  static constexpr bool kGridStride = kGridStride_;
  static constexpr int kUnroll = kUnroll_;
  static constexpr LoadHint kHint = kHint_;
};

constexpr int kTunedArch = 900;

// Single-pass scan (decoupled look-back and chained).
// sm_90, 4-byte: 128 threads x 32 items, striped, look-back delays (2026-11-22) 1200 ns first /
// 600 ns between polls. kernel_bench on an H100 80GB HBM3, int32 sum, 2026-11-22 (xCUB = CUB's time /
// ours; bench/results/tuning-h100-2026-11-22/kernel_bench-h100-2026-11-22.txt):
//   2^28: 790 us, 90.7% of a device copy, 1.12x cub::DeviceScan::InclusiveSum (884 us). Same
//         delays at 256x32: 796 us, 256x16: 822 us; 128x32 without delays: 848 us; the blocked
//         layout (thread-contiguous 16-byte loads), 256x16: 1064 us.
//   2^24: 60.2 us (1.17x CUB); 2^20: 12.5 us (1.52x); 2^16: 9.1 us (1.68x: one launch, CUB two).
// sm_90, 8-byte (2026-11-22; since 2026-11-25 128 x 32, below): 128 x 16 (the same 16 KiB
// tile), same delays. f64 sum 2^27: 807 us, 1.03x CUB;
//   128x12 804, 256x16 802 (within noise), 256x8 898, 128x16 without delays 888.
// Sweep 2^16..2^30 (tune_bench, every power of two, int32 and float32, H100, 2026-11-22, two
//   runs, bench/results/tuning-h100-2026-11-22/tune_bench-h100-2026-11-22-run{1,2}.txt): at least 1.11x CUB at every
//   size in run 2 (2^30: 3142 us i32 1.12x, 3128 us f32 1.11x; 2^16..2^20: 1.49-1.69x); one
//   outlier in run 1 (f32 2^26 1.01x; run 2 1.13x). Delay threshold (kDelayMinTiles = 500):
//   delaying from 0 tiles costs up to 1.3 us at 2^17..2^20; never delaying loses 1-2% at
//   2^22..2^23; 500 is kept.
// Longer first delays, 2026-11-25 (tune_bench scan scan8, H100, every variant checked against
//   CUB; bench/results/lookback-delays-h100-2026-11-25). % of copy at 2^28 / 2^29 / 2^30:
//   int32 128x32: 1200/600 (before) 91.0 / 91.1 / 90.9; 2400/1200 93.2 / 93.5 / 93.1; 2400/600
//   93.0 / 93.5 / 93.4; 3200/800 93.1 / 93.4 / 93.3; 3200/1600 92.8-93.5; 1600/1600 90.8-91.4;
//   4800/2400 85.9-86.6 (a cliff). float32 alike (2400/600: 93.1 / 93.3 / 93.4). At 2^24, where
//   the delays start to matter, 2400/600 is the one that loses nothing (i32 87.4 vs 87.3, f32
//   88.4 vs 87.2). Chosen: 2400/600. Longer tiles lost (128x48 90.0%, 128x64 90.6%, 64x64 88.8%).
//   int64 / float64: 128x16 1200/600 (before) 90.5 / 89.2% at 2^28; 128x16 2400/1200 92.8 / 91.0;
//   128x32 2400/1200 94.8 / 91.6 (2^29: 95.0 / 92.2); 128x32 3200/1600 94.9 / 91.8 (2^29 95.2 /
//   92.3); 4800/2400 a cliff again (84.9 / 77.8). 2^24: 128x32 2400/1200 i64 88.5 vs 87.9, f64
//   85.8 vs 86.6. Chosen: 128 x 32, 2400/1200 (clear of the cliff).
// Registers, 2026-11-25 (eleventh session; ncu and kernel suite, bench/results/
//   profile-h100-2026-11-25): the 8-byte look-back took 153-156 registers for SUM (3 blocks a
//   SM, 12 warps) where int64 took 128 (4 blocks). Compiled for 4 blocks a SM (128 registers, 12
//   bytes of spill), float64 SUM 2^28 went from 91.7-92.1% to 93.7-94.0% of copy (1.068x ->
//   1.087-1.092x CUB), 2^30 92.2% -> 94.1-94.2%, int64 91.1-91.6% -> 91.8-92.2% (three rounds,
//   alternating). 4-byte types capped at 8 blocks (64 registers, 32 bytes of spill; uncapped
//   66-70: 7 blocks) lost 2 points (90.8-91.1% against 92.6-93.3%): no cap there. 8-byte MIN/MAX
//   (178 registers) would spill ~2 KB a thread under the cap and were not timed (the suite
//   times SUM): they keep no cap (ScanTuningFor).
template <int kArch, int kSize>
struct ScanTuning;
template <int kArch>
struct ScanTuning<kArch, 4> : SinglePassPolicy<128, 32, true, 2400, 600> {};
template <int kArch>
struct ScanTuning<kArch, 8> : SinglePassPolicy<128, 32, true, 2400, 1200, 500, 4> {};
template <int kArch, int kSize, bool kMinMax>
struct ScanTuningFor : ScanTuning<kArch, kSize> {};
template <int kArch>
struct ScanTuningFor<kArch, 8, true> : ScanTuning<kArch, 8> {
  static constexpr int kMinBlocks = 0;  // the same policy, uncapped
};

// The look-back scan of arrays (ScanAlgorithm::kDecoupledLookback) since 2026-11-26: the tile in
// shared memory, moved by bulk copies (agent_single_pass_bulk.cuh); ScanTuning above still
// shapes the register kernel, which the chained scan runs. tune_bench on an H100 80GB HBM3
// (bench/results/lookback-bulk-2026-11-26), % of copy at 2^28 / 2^29 / 2^30, every output checked
// against CUB's; the register kernel (ScanTuning) in the same run first:
//   int32:   register 92.8 / 93.3 / 93.3; bulk 128x32 93.7 / 94.2 / 94.2; 128x64 94.9 / 95.2 /
//            95.4; 256x32 94.9 / 95.3 / 95.5; 64x64 93.8-94.4; 128x32 with 1200/600 or 1600/400
//            sleeps 92.4-92.9 (more blocks a SM do not want shorter sleeps).
//   float32: register 92.9 / 93.3 / 93.2; bulk 256x32 95.6 / 95.9 / 96.0; 128x64 95.2-95.5.
//   int64:   register 92.0 / 92.3; bulk 128x32 95.5 / 96.0; 128x16 94.1 / 94.3; 256x16 93.9 / 94.5.
//   float64: register 93.9 / 94.1; bulk 128x32 95.8 / 95.9; 128x16 94.2 / 94.3.
//   At 2^24 int32 256x32 is 83.3% against the register kernel's 85.8% (both 1.13-1.16x CUB);
//   int64 128x32 89.3% against 85.0% (0.998x CUB before, 1.048x now).
//   Small calls want small tiles (more blocks): 2^16 float32 256x32 9.06 us, 128x32 7.5-8.3,
//   the register kernel 7.9; 2^22-2^25 128x32 is as good as 256x32 or better; from 2^26 on
//   256x32 wins (2^27: 381.9 against 386.5 us).
//   H200, same binaries (2^28 / 2^30): int32 256x32 85.4 / 85.6, 128x32 87.2 / 87.0; float32
//   256x32 88.7 / 88.8, 128x32 87.2 / 86.9; int64 128x32 89.1, float64 87.2; the register kernel
//   83.8-84.1; 1600/400 and 1600/800 sleeps lose 1-2 points there too.
//   8-byte, H100 (tune_explore_h100): 128x16 against 128x32 at 2^21 / 2^22 / 2^23: int64 21.98 /
//   35.84 / 59.65 us against 22.66 / 38.82 / 60.13, float64 21.73 / 36.29 / 59.23 against 22.66 /
//   37.41 / 61.28; 2^24 alike; from 2^28 128x32 (95.5-96.0% against 94.1-94.6%).
// Chosen: 16 KiB tiles below 2^26 elements and 32 KiB from there: 4-byte 128 x 32 / 256 x 32,
// 8-byte 128 x 16 / 128 x 32; the register kernel's sleeps. ptxas (SUM): 4-byte 60 registers at
// 256 threads, 46 at 128; 8-byte 88; no spills.
// Temp storage is asked for with Small (more, smaller tiles: more tile words), so a size asked
// for n serves every call of up to n elements, whichever policy each takes (Wide's tiles are
// larger than Small's too).
//
// Wide: Large's place on devices of more than kWideAboveGBs peak DRAM bandwidth (the H200's
// 4814 GB/s against the H100's 3352: more bytes must be in flight, so more, smaller blocks).
// Kernel suite, both GPUs, the same binaries, two rounds each (bench/results/
// lookback-shapes-2026-11-26), % of copy at 2^28 (2^30):
//   4-byte   H200 int32 / float32           H100 int32 / float32
//   256x32   85.5-86.1 (86.2-86.6) / 89.3-89.9 (89.9-90.5)   97.8-98.2 (98.5-98.6) / 98.1-98.5 (98.9-99.0)
//   128x36   89.8-89.9 (89.7-90.3) / 89.5-89.9 (90.1-90.2)   97.9-98.0 (98.1) / 97.7-97.8 (98.1)
//   128x32   88.6-89.3 (89.7-89.8) / 89.3-89.6 (89.8-89.9)   97.8 (97.9-98.0) / 97.5 (98.0-98.1)
//   128x40   89.1-89.3 (90.1-90.2); 64x64 89.0-89.5; 128x48 87.1-87.4; 192x32 87.3-87.4;
//   256x24 84.8-85.0; 128x32 capped for 12 blocks a SM 85.3-85.4 (40 registers, spills).
//   8-byte   H200 int64 / float64                            H100 int64 / float64
//   128x32   89.7-90.0 (90.0-90.6) / 88.4-89.2 (88.9-89.6)   98.3-98.5 (99.0-99.1) / 98.5-98.6 (99.1-99.4)
//   128x24 for 9 blocks a SM (56 registers)
//            92.0-92.3 (92.5-93.1) / 91.8-92.4 (92.5-93.0)   97.9 (98.2-98.3) / 98.0-98.1 (98.3)
//   128x24 uncapped (64 registers, 8 blocks) 92.0-92.2 / 90.7-91.0; 96x32 91.7-91.8 / 86.3-86.7;
//   128x20 88.4-88.5 / 90.2-90.5; 160x16 86.9-87.1 / 86.8-87.3; 128x16 87.4-87.5 / 87.2.
// The H100 keeps Large (0.3-0.8 points better there); the H200 takes Wide (+4 points int32, +3.5
// float64, +2.3 int64, float32 level).
// 4-byte Wide, second sweep on the H200 (bench/results/lookback-tiles-2026-11-26; seven rounds
// of 128x44 against 128x36, two of the others), % of copy at 2^28 (2^30):
//   128x36 (49 registers, 9 blocks)       int32 88.8-89.8, median 89.6 (89.9-90.1)
//                                         float32 89.3-90.1, median 89.5 (89.9-90.4)
//   128x44 for 9 blocks (56 registers, 8 bytes of spill)
//                                         int32 88.8-89.8, median 89.6 (90.2-90.6)
//                                         float32 89.9-90.5, median 90.2 (90.9-91.1)
//   128x36 for 10 blocks (48 registers) int32 89.1-89.7, float32 89.2-89.4; 128x40 for 10 (24
//   bytes of spill) int32 84.7-84.8; 96x48 87.6-87.8; 160x28 87.2-87.5. At 2^26 128x44 is level
//   for float32 (medians 85.6 / 85.4) and 1.4 points down for int32 (84.4 / 85.8, 1.20x CUB).
//   L2 evict-first hints on the bulk copies (createpolicy): on the store level, on the load
//   -1 to -2 points.
// Chosen: 128 x 44 compiled for 9 blocks a SM.
//
// Tiny: small calls, up to kTinyUpTo elements, at most kIndexedTilesMax tiles (below). More,
// shorter tiles spread a small call's bytes over more SMs. tune_bench's small table, H100, three
// rounds (bench/results/small-tiles-2026-11-27), our time / CUB's, medians:
//   4-byte   2^12    2^13    2^14    2^15    2^16    2^17    2^18
//   128x32   0.597   0.649   0.656   0.672   0.657   0.649   0.641   int32 (float32 alike)
//   128x16   0.605   0.621   0.608   0.608   0.600   0.616   0.666
//   64x32, 64x16, 128x8, 256x8: between the two.
//   8-byte 128x8 and 64x16 against 128x16: level at 2^16, worse at 2^17: 8-byte keeps Small.
template <int kArch, int kSize>
struct BulkScanTuning;

template <int kArch>
struct BulkScanTuning<kArch, 4> {
  using Tiny = SinglePassPolicy<128, 16, true, 2400, 600>;
  static constexpr uint64_t kTinyUpTo = 1ull << 17;
  using Small = SinglePassPolicy<128, 32, true, 2400, 600>;
  using Large = SinglePassPolicy<256, 32, true, 2400, 600>;
  using Wide = SinglePassPolicy<128, 44, true, 2400, 600, 500, 9>;
  static constexpr uint64_t kLargeFrom = 1ull << 26;
};
template <int kArch>
struct BulkScanTuning<kArch, 8> {
  using Small = SinglePassPolicy<128, 16, true, 2400, 1200>;
  using Tiny = Small;
  static constexpr uint64_t kTinyUpTo = 0;
  using Large = SinglePassPolicy<128, 32, true, 2400, 1200>;
  using Wide = SinglePassPolicy<128, 24, true, 2400, 1200, 500, 9>;
  static constexpr uint64_t kLargeFrom = 1ull << 26;
};
constexpr double kWideAboveGBs = 4000;

// The widening look-back scans (scan_widen.h, integers): the bulk kernel with a second shared
// array for the input tile (kTile x kInSize bytes beside the kTile x kOutSize of the tile that
// goes out; agent_single_pass_bulk.cuh). The shapes of the output size's BulkScanTuning, except
//   - 8-byte outputs from kLargeFrom: 128 x 24 with 1200 / 600 ns sleeps (below);
//   - 4-byte outputs of 2-byte inputs: Large is 128 x 44 (Wide's shape), as 256 x 32 would need
//     48 KiB of static shared memory (not timed);
//   - Wide without its register cap (9 blocks a SM): the input tile's shared memory lets no more
//     than 6 to 8 such blocks onto a SM, so the cap would spill for nothing.
// int8 -> int64 exclusive SUM, tune_bench widen on an H100 80GB HBM3, 2026-11-27, every output
// checked against CUB's, % of a copy of the same bytes (9 per element) at 2^24 / 2^28 / 2^29.
// Chosen on a first run (the build before; its output not kept):
//   128x32 d2400/1200 (the int64 scan's Large)   84.3 / 84.3 / 84.7
//   128x32 d1200/600 86.0 at 2^28 and 2^29; d600/300 84.2 / 84.1
//   128x16 d2400/1200 (Small)  86.6 / 88.6 / 88.5;  d1200/600 88.7 / 88.3 / 88.1;  d600/300 85.4-86.9
//   128x24 d1200/600           85.2 / 89.2 / 89.2   (chosen from 2^26: 27 KiB a block, 8 a SM)
//   256x16 d1200/600 86.7-86.8; 64x32 d1200/600 85.5-85.7 (2^28, 2^29)
// The final build's run (bench/results/scan-widen-h100-2026-11-27/tune.txt): 128x24 d1200/600
// 77.5 / 88.6 / 89.4, d2400/1200 75.3 / 88.8 / 89.9, d1600/800 78.4 / 88.8 / 89.4, d1200/300
// 78.7 / 88.7 / 89.3; 128x20 86.5 / 87.0, 128x28 84.4 / 85.0, 96x32 85.9 / 87.2 (2^28, 2^29);
// 128x32 d2400/1200 69.3 / 83.8 / 85.0. The kernel suite at 2^30 (suite.txt there): 89.6% of
// copy, 1.196x CUB over a transform iterator (85.2% with the int64 scan's shapes).
// A tile moves 36 KiB where the int64 scan's moves 64: more, smaller blocks keep more bytes in
// flight. int16 -> 8-byte takes the same shape (not timed apart); 4-byte outputs keep
// BulkScanTuning's shapes (not timed).
template <int kArch, int kInSize, int kOutSize>
struct WidenScanTuning : BulkScanTuning<kArch, kOutSize> {
  using Base = BulkScanTuning<kArch, kOutSize>;
  using Large = std::conditional_t<kOutSize == 8, SinglePassPolicy<128, 24, true, 1200, 600>, typename Base::Large>;
  using Wide = SinglePassPolicy<Base::Wide::kThreads, Base::Wide::kItems, true, Base::Wide::kFirstDelayNs,
                                Base::Wide::kPollDelayNs, Base::Wide::kDelayMinTiles>;
};
template <int kArch>
struct WidenScanTuning<kArch, 2, 4> : WidenScanTuning<kArch, 1, 4> {
  using Large = typename WidenScanTuning<kArch, 1, 4>::Wide;
};

// Launches of at least this many tiles prefetch each block's likely tile into L2 before drawing
// the ticket (tile_state.cuh PrefetchLikelyTile; the look-back scans, bulk and register kernels).
// Kernel suite, bench/results/lookback-prefetch-2026-11-26, prefetch off -> on, % of copy at 2^28
// (2^30), two rounds each:
//   H100: int32 94.6-95.1 -> 97.6-98.0 (95.1-95.3 -> 98.5-98.6), float32 95.5-95.9 -> 98.4-98.6
//         (96.2-96.3 -> 99.1-99.4), int64 95.6-96.0 -> 98.4-98.5 (96.1-96.3 -> 98.8-99.0),
//         float64 95.7-95.9 -> 98.2-98.7 (96.2 -> 99.0).
//   H200: int32 85.1-85.4 -> 85.6-85.8, float32 88.4-89.1 -> 88.6-90.6, int64 88.3-88.7 ->
//         89.2-89.7, float64 87.7-87.9 -> 88.4.
//   With 1024 tiles (2^22 elements) every block is resident at once and the prefetches come as
//   one burst ahead of the loads the look-back waits on: H200 int64 1.04x -> 0.97x CUB, float64
//   1.11 -> 1.04-1.07x, int32 1.41-1.45 -> 1.33-1.35x; the H100 within its noise there. From 4096
//   tiles (2^24 elements of 4-byte or 8-byte types) both GPUs gained or held.
constexpr uint32_t kPrefetchMinTiles = 4096;

// Look-back launches of at most this many tiles take tile blockIdx.x rather than the ticket's, and
// draw the ticket after the tile's load has started (agent_single_pass_bulk.cuh): a small call
// then waits for the atomic and the load together, not one after the other. Safe whatever order
// blocks start in: fewer blocks than an sm_90 GPU has SMs cannot hold every place where a
// lower tile they wait for could run.
constexpr uint32_t kIndexedTilesMax = 64;

// Reduce-then-scan family: 256 x 16 (4-byte) / 256 x 8 (8-byte) tiles in the blocked
// arrangement the classic block scans need; at most kMaxBlocks blocks, each walking an even
// share of the tiles (a fixed count, so the association order depends on n alone).
// Not tuned: it reads the input twice, so 2/3 of a copy's speed is its ceiling; measured 0.61x
// CUB at 2^28 int32 (1438 us), whichever block scan (kernel_bench).
template <int kArch, int kSize>
struct RtsTuning : TilePolicy<256, 64 / kSize> {
  static constexpr int kMaxBlocks = 1024;
};

// Reduce: 256 x 16 (4-byte) / 256 x 8 (8-byte) striped tiles, grid-stride over at most 1024
// blocks (one wave on 132 SMs at 8 blocks per SM; a constant, so the association depends on n
// alone), plain loads, one tile's loads in flight per thread.
// Before (blocked loads, even share): f32 sum 2^28: 364 us, 2950 GB/s read, 0.97x
// cub::DeviceReduce::Sum (353 us).
// bench/tune/tune_bench.cu on an H100 80GB HBM3, 2026-11-22 (xCUB = CUB's time / ours; same run):
//   striped, even share (first candidate): f32 2^28 353.7 us 1.00x, 2^26 1.03x, 2^24 1.06x,
//     2^22 1.17x, 2^20 1.28x; f64 2^28 699-725 us 0.97-1.00x (two identical runs: the spread).
//   striped, grid-stride (chosen): f32 2^28 349.2 us 1.01x (3075 GB/s), 2^26 93.3 us 1.04x,
//     2^24 1.10x, 2^22 1.17x, 2^20 1.31x; f64 2^28 693.8 us 1.01x, 2^26 1.02x, 2^24 1.06x.
//   Run 2 (chosen default, all four types, 2^20..2^28): f32 1.01-1.21x (2^28 353 us 1.011x),
//     i32 1.01-2.1x, f64 1.006-1.07x, i64 0.981x at 2^20 (13.5 us; the identical policy in the
//     same run: 11.6 us 1.14x, small sizes are noisy) and 1.01-1.13x above.
//   Rejected: 2 tiles in flight (u2), even share: f32 2^28 0.96x, f64 0.90-0.92x; 528 blocks
//   grid-stride u2 ld.global.nc: as good as chosen (1.015x / 1.009x), no gain for the extra
//   state; ld.global.nc or .cs alone: within 0.5% of plain loads; 128x32 / 256x32 (f64 128x16 /
//   256x16): 0.92x f64 at 2^26..2^28.
template <int kArch, int kSize>
struct ReduceTuning : ReducePolicy<256, 64 / kSize, 1024, true, 1, LoadHint::kDefault> {};

// Compaction: striped loads of values and flags, kept values staged in shared memory and written
// out contiguously; look-back delays 2400 ns first / 1200 ns between polls on the H100, from 500
// tiles (until 2026-11-25 the scan's 1200 / 600: the figures below ran under those unless they
// name others), shorter on faster memory (CompactDelays, below).
// Values only (CompactTuning): 128 x 64 (4-byte, slim gather) / 256 x 16 (8-byte). With indices
// (CompactIndexTuning, 8-byte gather words): 256 x 16.
// Before (blocked loads, no delays, 256 x 16): f32 by flags (half kept) 2^28: 851 us, 1.03x
// cub::DeviceSelect::Flagged (876 us).
// tune_bench, H100, f32 flags half kept, same run: 2^28 726 us = 1.21x CUB (876 us), 86% of a
//   copy's time for the same bytes; 2^24 58.1 us 1.23x; 2^20 11.7 us 1.44x. Candidates at 2^28:
//   same without delays 844 us (1.04x: the delays are most of the gain), d2000/1000 728,
//   128x32 741, 128x16 763, 512x8 900, 256x8 925 (smaller tiles: twice the look-backs).
//   Run 2: f32 2^28 1.205x. 8-byte (f64 flags, 256 x 8): 2^28 1.09x, 2^24 1.12x, 2^20 1.34x.
// 2026-11-25 (tune_bench compact, two rounds, every variant's output checked against CUB's;
// bench/results/compact-gather-h100-2026-11-25): a call that asks for no indices gathers its kept
// values as T (the slim gather: half a 4-byte tile's shared memory), which lets 128-thread blocks
// take long tiles. f32 flags half kept, 2^28, % of a copy of the same bytes:
//   256x16 (8-byte gather, the old default) 86.0-86.5%; 256x16 slim 86.0% (the gather alone is
//   not it); 128x32 slim 89.3-90.7%; 256x32 slim 89.1%; 128x48 slim 92.6%; 128x64 slim 92.6%
//   (679 us, 1.29x CUB; 2^24 78.4% vs 78.1%, 2^20 83.5% vs 82.6%: no size loses); 64x64 90.8%;
//   192x32 89.2%; 512x16 79.5%; 128x32 slim with delays 600/300 87.5%, 2400/1200 92.3%.
//   Chosen: 128 x 64, slim. Calls that want indices keep 256 x 16 with the 8-byte gather
//   (CompactIndexTuning), whose figures are the old ones above.
// f64 flags half kept, 2^28: 256x8 (the old default) 85.2-85.7%; 256x16 93.0-93.6% (1246-1249 us,
//   1.19x CUB; 2^24 83.3-83.9% vs 80.5-81.7%, 2^20 85.0-86.7% vs 79.9-84.3%); 128x32 92.6-93.3%;
//   128x24 94.1% (one round; 2^20 81.1%); 256x12 90.0%; 192x16 92.5%; 512x8 79.4%. Chosen:
//   256 x 16 (two rounds agree); 128 x 24 is the next to confirm.
// Delays, third round (same day, tune_delays.txt there): 128x64 slim 2400/1200 94.4%, 3200/1600
//   94.7% (f32, 2^28; 1200/600 92.8% in that run); f64 256x16 2400/1200 95.1%, 3200/1600 95.2%
//   (1200/600 92.7%). 2^24 and 2^20 within noise. Chosen: 2400/1200 for both kernels.
template <int kArch, int kSize>
struct CompactTuning : SinglePassPolicy<kSize == 4 ? 128 : 256, kSize == 4 ? 64 : 16, true, 2400, 1200> {};
template <int kArch, int kSize>
struct CompactIndexTuning : SinglePassPolicy<256, 16, true, 2400, 1200> {};  // also 8-byte values without indices

// The compaction look-back's sleeps on a device of peak DRAM bandwidth peak_gbs (device_facts.cuh),
// chosen at launch: the H100 and the H200 are both sm_90, so the architecture cannot tell them
// apart. The policy's sleeps were tuned on the H100 (3352 GB/s). A tile's predecessors publish
// sooner where memory is faster, so the sleeps shrink in proportion; slower or unknown devices
// keep the policy's. H200 (4814 GB/s by this formula: 1670 / 835 ns), 2026-11-25, tune_bench
// compact, two rounds, every variant checked against CUB (bench/results/
// compact-delays-h200-2026-11-25), % of copy at 2^28, first / poll ns:
//   f32 128x64 slim: 800/400 82.6-83.2; 1200/600 84.5-84.6; 1600/800 84.4-84.5; 2000/1000
//     84.6-84.7; 2400/1200 (the H100's) 80.2-80.4 (a cliff); 3200/1600 80.1-80.4.
//   f64 256x16: 800/400 82.3-82.6; 1200/600 85.2; 1600/800 85.1-85.2; 2000/1000 85.0;
//     2400/1200 81.1-81.3; 3200/1600 81.1-81.2. 2^20 and 2^24 within a point either way.
// On the H100 the plateau is 2400-3200 with a cliff at 4800 (above); scaled, it lands in the
// H200's plateau (1200-2000), clear of its cliff.
constexpr double kDelayReferenceGBs = 3352;  // the H100 SXM the policies were tuned on
template <class Policy>
LookBackDelays CompactDelays(double peak_gbs) {
  const double scale = peak_gbs > kDelayReferenceGBs ? kDelayReferenceGBs / peak_gbs : 1.0;
  return {static_cast<int>(Policy::kFirstDelayNs * scale), static_cast<int>(Policy::kPollDelayNs * scale)};
}

// Fused segmented scan (segmented_impl.cuh): the single-pass scan's layout and delays over
// (head, value) pairs, by the sizes of a value and a key.
// sm_90, 4-byte: 128 x 32 (111-126 registers, no spills). kernel_suite on an H100 80GB HBM3,
// int32 SUM under int32 keys in runs of 1000 against cub::DeviceScan::InclusiveScanByKey, same
// run (bench/results/segmented-fused-h100-2026-11-24/): 2^28 1180-1185 us, 90.6-91.0% of a copy
// of the same 12 bytes per element, 1.011-1.015x CUB; 2^24 1.085x; 2^20 1.37x; 2^16 1.67x.
// 128 x 16 (64-71 registers): 2^28 1192 us 1.006x, 2^24 1.105x, 2^20 1.30x, 2^16 1.65x.
// With the full-tile paths (segmented_impl.cuh), 128 x 32: 2^28 1139 us, 94.2% of copy, 1.054x.
// sm_90, 8-byte: 128 x 8 (the same 8 KiB of values per tile as 128 x 16 4-byte ones); not timed
// against a peer (the CUB by-key peer is int32 only).
// 2026-11-25: the plain scan's new delays (2400/600) taken here too: 2^28 1118 us, 96.5% of copy,
// 1.076x CUB (was 1.054x); 2^30 1.072x; 2^24 1.11x; 2^20 1.33x (bench/results/
// lookback-delays-h100-2026-11-25/ks_final.txt).
// Since 2026-11-26 the tiles run on the bulk kernel (values and keys in shared memory by bulk
// copies; register kernel 111-126 registers, 4 blocks a SM; bulk 65 registers and 33 KB, 6
// blocks). kernel_suite, H100, int32 under uint32 keys, three rounds alternating
// (bench/results/segmented-bulk-2026-11-26/policies), x CUB at 2^20 / 2^24 / 2^26 / 2^28 / 2^30:
//   128x32 2400/600  1.15-1.20 / 1.09-1.11 / 1.100-1.104 / 1.097-1.100 / 1.102-1.103
//   128x16           1.07-1.12 / 1.13-1.14 / 1.107-1.112 / 1.100-1.101 / 1.098-1.100
//   128x32 3200/800  1.16-1.18 / 1.10-1.11 / 1.101-1.107 / 1.098-1.099 / 1.102
//   64x32            1.03-1.08 / 1.07-1.12 / 1.099-1.106 / 1.093-1.096 / 1.094-1.096
// (the register kernel: 2^28 1.092-1.096x, 2^30 1.095-1.097x). Then by blocks a SM (shared
// memory, registers; occupancy/ and occupancy2/ there, three rounds each, 128x32 in both):
//   128x32  6 blocks  2^28 1.095-1.099 / 2^30 1.100-1.103
//   128x28  7         1.090-1.092 / 1.092-1.095
//   96x32   9         1.101-1.104 / 1.106-1.107
//   128x24  9         1.106-1.115 / 1.110-1.111 (2^26 1.108-1.114, 2^24 1.104-1.126, 2^20 1.13-1.24)
//   128x20  10        1.099-1.101 / 1.101-1.102
//   96x24   12        1.096-1.097 / 1.099
//   192x16  9         1.098-1.102 / 1.101-1.102
// Chosen: 128 x 24 (3072 elements, 51 registers, 24 KB) where a key takes 4 bytes or less, else
// 128 x 16 (8-byte keys or values, 24-32 KB a tile; not timed against a peer: CUB's by-key peer
// here is int32 only). Static shared memory stops at 48 KiB.
template <int kArch, int kValueSize, int kKeySize>
struct SegmentedTuning : SinglePassPolicy<128, kValueSize == 4 && kKeySize <= 4 ? 24 : 16, true, 2400, 600> {};

// Fused reduce by key (reduce_by_key_impl.cuh): 4-byte values only. sm_90: 128 x 16. H100, int32
// SUM over runs of 1000 int32 keys against cub::DeviceReduce::ReduceByKey, same run
// (bench/results/segmented-fused-h100-2026-11-24/ks_rbk.txt): 2^28 970 us 0.89x, 2^24 0.97x,
// 2^20 1.18x. 128 x 32: 2^28 0.88x, 2^24 0.94x (ALU-bound: bench/NOTES.md). With a full tile's
// ends taken from its heads (ks_rbk_ends_from_heads.txt): 2^28 950 us 0.91x, 2^24 0.98x.
// Compiled for 8 blocks a SM (64 registers; uncapped 62 with 32-bit keys, 72 with 64-bit ones),
// 2026-11-25 (bench/results/rbk-blocks-h100-2026-11-25, two rounds alternating, int32 keys):
// 2^28 914-915 us 0.946-0.947x (uncapped 949-952 us, 0.908-0.916x), 2^30 0.940-0.942x, 2^24
// 0.99-1.00x. 7 blocks (70 registers) in an earlier run: 0.923x. With heads counted instead
// of closed runs (one add a combination; bench/results/latency-rbk-h100-2026-11-25): 2^28
// 852-855 us 1.023-1.024x, 2^30 1.011-1.018x, 2^24 1.08-1.09x.
template <int kArch, int kSize>
struct ReduceByKeyTuning : SinglePassPolicy<128, 16, true, 1200, 600, 500, 8> {};

// The deterministic scan's one pass (agent_canonical.cuh; its tile is the canonical tree's, 256
// threads x 16 items): tiles a persistent block keeps (3: one loading, one in phase 1, one in
// phase 2; 2: the next tile's load starts when the current one is stored). H100, kernel suite,
// same run (bench/results/deterministic-persistent-h100-2026-11-25/stages): float32 3 tiles
// 2^28 76.9% of copy / 2^30 78.3% (2 tiles 76.2 / 76.8%: more blocks a SM do not make up for
// the exposed load); float64 2 tiles 82.1 / 83.9% (3 tiles 74.7 / 74.0%: 105 KB of shared
// memory a block leaves 2 blocks a SM). The kernel before (a block a tile) ran 72% / 79%.
// Since 2026-11-25 (eleventh session: tickets drawn ahead, tiles counted once a block, P[j-1] by
// one warp; bench/results/deterministic-tickets-h100-2026-11-25) float32 84.9% / 85.1%, float64
// 88.3% / 89.1%. Loading a tile's predecessors' words before the next tile's phase 1 (kPrefetch,
// float64's until then) no longer paid: float64 88.4% / 89.7% with it, and 2^22 0.96-1.00x CUB
// against 1.04-1.07x without; removed. 2026-11-26 (bench/results/deterministic-phase2-2026-11-26,
// tune_bench det, CUB in the same run): with the carry fetched beside the aggregates and 8-byte
// tiles padded one element per 16, H100 float32 88.4-89.2% of copy (1.08-1.09x CUB), float64
// 91.7-92.2% (1.065-1.07x); H200 float32 75-76% (1.01-1.03x), float64 78.4-79.0% (1.015-1.02x).
// Same runs: float32 with 2 tiles (6 blocks a SM) 86-87% on the H100, 71% on the H200; float64
// with 3 tiles (2 blocks a SM) 85% / 70%; fewer persistent blocks than fit lose on both.
template <int kArch, int kSize>
struct CanonicalTuning {
  static constexpr int kStages = kSize == 4 ? 3 : 2;
};

// The widening deterministic scan (float16 -> float32, scan_widen.h): the same one pass, its
// stages holding the 2-byte input tiles (8 KiB each) and one float32 tile staged for the store
// (43 KiB a block against float32's 51). tune_bench widen, H100, 2026-11-27, inclusive SUM, % of a
// copy of the same bytes (6 per element) at 2^24 / 2^28 / 2^30, a first run (the build before)
// and the final build's run (bench/results/scan-widen-h100-2026-11-27/tune.txt):
//   float16 by integer operations (HalfBitsToFloat), 3 tiles   71.1 / 83.1 / 85.4;  70.2 / 83.2 / 85.5
//                                                    2 tiles   69.1 / 77.8 / 79.0
//   by the hardware's cvt.f32.f16, 3 tiles                     82.2 / 88.1 / 90.1;  81.3 / 88.0 / 90.5
//                                  2 tiles                     77.7 / 87.2 / 87.9
//   cvt.f32.f16 with NaN payloads put back, 3 tiles            79.3 / 88.6 / 91.0;  76.0 / 86.9 / 88.8
//                                           2 tiles                                 75.2 / 83.7 / 84.5
// Chosen: the last, 3 tiles (the host's bits for every pattern, scan_widen.h Widen; the hardware's
// alone drops NaN payloads, which the first element of an inclusive scan shows). Kernel suite at
// 2^30, same run: 89.1% of copy, 1.226x CUB. Each element is converted twice (its tile's phase 1
// and phase 2): the integer conversion, about ten operations, was most of the gap.
template <int kArch, int kInSize, int kOutSize>
struct CanonicalWidenTuning {
  static constexpr int kStages = 3;
};

}  // namespace gpuscan::kernels::detail
