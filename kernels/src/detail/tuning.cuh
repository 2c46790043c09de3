// Tuning as plain data: threads per block and items per thread, per architecture and element
// size. Only sm_90 (H100/H200) is tuned; other architectures take the same numbers.
// The figures that justified each choice are in the comments (tests/gpu/kernel_bench.cu on an
// H100 80GB HBM3, CUDA 13.0; its full output is in tests/gpu/results/).
#pragma once

namespace gpuscan::kernels::detail {

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
template <int kThreads_, int kItems_, bool kStriped_, int kFirstDelayNs_, int kPollDelayNs_>
struct SinglePassPolicy : TilePolicy<kThreads_, kItems_> {
  static constexpr bool kStriped = kStriped_;
  static constexpr int kFirstDelayNs = kFirstDelayNs_;
  static constexpr int kPollDelayNs = kPollDelayNs_;
};

constexpr int kTunedArch = 900;

// Single-pass scan (decoupled look-back and chained).
// sm_90, 4-byte: 128 threads x 32 items, striped, look-back delays 1200 ns first / 600 ns
// between polls. kernel_bench on an H100 80GB HBM3, int32 sum, 2026-11-22 (xCUB = CUB's time /
// ours; tests/gpu/results/kernel_bench-h100-2026-11-22.txt):
//   2^28: 790 us, 90.7% of a device copy, 1.12x cub::DeviceScan::InclusiveSum (884 us). Same
//         delays at 256x32: 796 us, 256x16: 822 us; 128x32 without delays: 848 us; the blocked
//         layout (thread-contiguous 16-byte loads), 256x16: 1064 us.
//   2^24: 60.2 us (1.17x CUB); 2^20: 12.5 us (1.52x); 2^16: 9.1 us (1.68x: one launch, CUB two).
// sm_90, 8-byte: 128 x 16 (the same 16 KiB tile), same delays. f64 sum 2^27: 807 us, 1.03x CUB;
//   128x12 804, 256x16 802 (within noise), 256x8 898, 128x16 without delays 888.
template <int kArch, int kSize>
struct ScanTuning;
template <int kArch>
struct ScanTuning<kArch, 4> : SinglePassPolicy<128, 32, true, 1200, 600> {};
template <int kArch>
struct ScanTuning<kArch, 8> : SinglePassPolicy<128, 16, true, 1200, 600> {};

// Reduce-then-scan family: 256 x 16 (4-byte) / 256 x 8 (8-byte) tiles in the blocked
// arrangement the classic block scans need; at most kMaxBlocks blocks, each walking an even
// share of the tiles (a fixed count, so the association order depends on n alone).
// Not tuned: it reads the input twice, so 2/3 of a copy's speed is its ceiling; measured 0.61x
// CUB at 2^28 int32 (1438 us), whichever block scan (kernel_bench).
template <int kArch, int kSize>
struct RtsTuning : TilePolicy<256, 64 / kSize> {
  static constexpr int kMaxBlocks = 1024;
};

// Reduce: 256 x 16 (4-byte) / 256 x 8 (8-byte), at most 1024 blocks (one wave on 132 SMs at 8
// blocks per SM), which also fixes the association order for any given n.
// f32 sum 2^28: 364 us, 2950 GB/s read, 0.97x cub::DeviceReduce::Sum (353 us).
template <int kArch, int kSize>
struct ReduceTuning : TilePolicy<256, 64 / kSize> {
  static constexpr int kMaxBlocks = 1024;
};

// Compaction: 256 x 16 (4-byte) / 256 x 8 (8-byte), blocked loads, scatter through shared
// memory. f32 by flags (half kept) 2^28: 851 us, 1.03x cub::DeviceSelect::Flagged (876 us).
template <int kArch, int kSize>
struct CompactTuning : TilePolicy<256, 64 / kSize> {};

}  // namespace gpuscan::kernels::detail
