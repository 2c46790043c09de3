// Non-template pieces: temp-storage clearing, algorithm names, the segmenting test hook.
#include <atomic>

#include "detail/common.cuh"
#include "gpuscan/kernels/scan.h"
#include "gpuscan/kernels/testing.h"

namespace gpuscan::kernels {

cudaError_t ClearTempStorage(void* d_temp, std::size_t temp_bytes, cudaStream_t stream) {
  if (d_temp == nullptr) return temp_bytes == 0 ? cudaSuccess : cudaErrorInvalidValue;
  return cudaMemsetAsync(d_temp, 0, temp_bytes, stream);
}

const char* ScanAlgorithmName(ScanAlgorithm algo) {
  switch (algo) {
    case ScanAlgorithm::kDecoupledLookback: return "decoupled_lookback";
    case ScanAlgorithm::kChained: return "chained";
    case ScanAlgorithm::kReduceThenScan: return "reduce_then_scan";
    case ScanAlgorithm::kKoggeStone: return "kogge_stone";
    case ScanAlgorithm::kBrentKung: return "brent_kung";
    case ScanAlgorithm::kBlelloch: return "blelloch";
    case ScanAlgorithm::kHillisSteele: return "hillis_steele";
    case ScanAlgorithm::kCub: return "cub";
  }
  return "unknown";
}

namespace {
std::atomic<uint32_t> g_max_tiles_per_launch{detail::kMaxTilesPerLaunch};
std::atomic<uint32_t> g_max_persistent_blocks{0};
std::atomic<bool> g_canonical_carry_walk{false};
}  // namespace

namespace detail {
uint32_t MaxTilesPerLaunch() { return g_max_tiles_per_launch.load(std::memory_order_relaxed); }
uint32_t MaxPersistentBlocks() { return g_max_persistent_blocks.load(std::memory_order_relaxed); }
bool CanonicalCarryWalk() { return g_canonical_carry_walk.load(std::memory_order_relaxed); }
}  // namespace detail

namespace testing_hooks {
void SetMaxTilesPerLaunch(uint32_t tiles) {
  g_max_tiles_per_launch.store(tiles == 0 || tiles > detail::kMaxTilesPerLaunch ? detail::kMaxTilesPerLaunch : tiles,
                               std::memory_order_relaxed);
}
void SetMaxPersistentBlocks(uint32_t blocks) { g_max_persistent_blocks.store(blocks, std::memory_order_relaxed); }
void SetCanonicalCarryWalk(bool on) { g_canonical_carry_walk.store(on, std::memory_order_relaxed); }
}  // namespace testing_hooks

}  // namespace gpuscan::kernels
