// The canonical (reproducible) scan's host side: temp storage, the one-pass launches (shared
// with the widening float16 scan, scan_widen_impl.cuh) and the reduction's three kernels.
#pragma once

#include <algorithm>

#include "agent_canonical.cuh"
#include "agent_canonical_reduce.cuh"
#include "canonical_words.cuh"
#include "common.cuh"
#include "device_facts.cuh"
#include "gpuscan/kernels/canonical_scan.h"
#include "tuning.cuh"

namespace gpuscan::kernels::detail::canonical {

inline std::size_t Round16(std::size_t b) { return (b + 15) & ~std::size_t{15}; }

// Reductions (no output): the aggregates, the supers' totals and the carries, three small
// kernels after one read of the input.
template <class T>
struct Layout {
  std::size_t aggs, totals, bytes;
  Layout(uint64_t tiles, uint64_t supers) {
    aggs = 0;
    totals = Round16(tiles * sizeof(T));
    bytes = totals + Round16(supers * sizeof(T));
  }
};

// Tiles one OnePassKernel launch takes at most: the ticket's width, less room for the persistent
// blocks' extra draws (one ticket past the tiles each).
inline uint64_t OnePassLaunchTiles(uint64_t tiles) {
  return std::min<uint64_t>(std::max<uint64_t>(tiles, 1),
                            std::min<uint64_t>(MaxTilesPerLaunch(), kMaxTilesPerLaunch - 65536));
}

// `tiles` whole tiles of in by OnePassKernel, in launches of at most OnePassLaunchTiles(tiles)
// tiles, each continuing the state the one before left, on as many blocks as fit the device at
// once. Tile words (view.body) need no clearing. first_tile: in's first tile's position in the
// array (its super position j0); fresh: no carry comes in, so the array's first launch writes
// the state without reading it. In: the input's element type (T but for the widening scan).
template <class T, class Op, int kStages, class In>
cudaError_t LaunchOnePass(const In* in, T* out, uint64_t tiles, uint64_t first_tile, bool fresh, bool exclusive,
                          const TempView& view, CanonicalState<T>* state, cudaStream_t stream) {
  const uint64_t launch_tiles = OnePassLaunchTiles(tiles);
  constexpr auto kernel = OnePassKernel<T, Op, kStages, In>;
  constexpr int smem = sizeof(OnePassSmem<T, kStages, In>);
  uint64_t resident = 0;
  GPUSCAN_TRY(ResidentBlocks<kernel>(kThreads, smem, resident));
  if (MaxPersistentBlocks() != 0) resident = std::min<uint64_t>(resident, MaxPersistentBlocks());
  auto* words = reinterpret_cast<TileWord*>(view.body);
  for (uint64_t done = 0; done < tiles; done += launch_tiles) {
    const auto launch = static_cast<uint32_t>(std::min(launch_tiles, tiles - done));
    const auto grid = static_cast<uint32_t>(std::min<uint64_t>(launch, resident));
    OnePassWords<T> w{};
    w.aggs = words;
    w.totals = words + launch;
    w.carries = w.totals + OnePassSupers(launch);
    w.tiles = launch;
    w.j0 = static_cast<int>((first_tile + done) % kThreads);
    w.fresh = fresh && first_tile + done == 0;
    w.walk_only = CanonicalCarryWalk();
    w.state = state;
    kernel<<<grid, kThreads, smem, stream>>>(in + done * kTile, out + done * kTile, exclusive, view.header, w);
    GPUSCAN_CHECK_LAUNCH();
  }
  return cudaSuccess;
}

// kStages: tiles a persistent block keeps (tuning.cuh's choice unless a tuning run asks for another).
template <class T, class Op, int kStages = CanonicalTuning<kTunedArch, sizeof(T)>::kStages>
cudaError_t CanonicalScanImpl(void* d_temp, std::size_t& temp_bytes, const T* in, T* out, uint64_t tiles,
                              uint64_t first_tile, bool exclusive, CanonicalState<T>* state,
                              cudaStream_t stream) {
  const Layout<T> layout(tiles, DivUp(tiles, kThreads) + 1);
  const std::size_t body = std::max(layout.bytes, OnePassBytes(OnePassLaunchTiles(tiles)));
  if (d_temp == nullptr) {
    temp_bytes = TempBytesFor(body);
    return cudaSuccess;
  }
  if (tiles == 0) return cudaSuccess;
  if (in == nullptr || state == nullptr) return cudaErrorInvalidValue;
  if (tiles > 0x7fffffffu) return cudaErrorInvalidValue;
  TempView view;
  GPUSCAN_TRY(ViewTemp(d_temp, temp_bytes, body, view));
  if (out != nullptr) {
    return LaunchOnePass<T, Op, kStages, T>(in, out, tiles, first_tile, true, exclusive, view, state, stream);
  }
  const int j0 = static_cast<int>(first_tile % kThreads);
  const auto grid = static_cast<unsigned>(tiles);
  T* aggs = reinterpret_cast<T*>(view.body + layout.aggs);
  T* totals = reinterpret_cast<T*>(view.body + layout.totals);
  const auto supers = static_cast<uint32_t>(DivUp(j0 + tiles, kThreads));
  TileAggKernel<T, Op><<<grid, kThreads, 0, stream>>>(in, aggs);
  GPUSCAN_CHECK_LAUNCH();
  SuperKernel<T, Op><<<supers, kThreads, 0, stream>>>(aggs, tiles, j0, state, totals);
  GPUSCAN_CHECK_LAUNCH();
  CarryKernel<T, Op><<<1, kThreads, 0, stream>>>(aggs, tiles, j0, supers, totals, state, first_tile == 0);
  GPUSCAN_CHECK_LAUNCH();
  // The temp-storage contract: leave the body as zero as it came.
  return cudaMemsetAsync(view.body, 0, layout.bytes, stream);
}

}  // namespace gpuscan::kernels::detail::canonical

namespace gpuscan::kernels {

template <class T, class Op>
cudaError_t CanonicalScan(void* d_temp, std::size_t& temp_bytes, const T* d_in, T* d_out, uint64_t tiles,
                          uint64_t first_tile, bool exclusive, CanonicalState<T>* d_state, cudaStream_t stream) {
  return detail::canonical::CanonicalScanImpl<T, Op>(d_temp, temp_bytes, d_in, d_out, tiles, first_tile, exclusive,
                                                     d_state, stream);
}

}  // namespace gpuscan::kernels

#define GPUSCAN_INSTANTIATE_CANONICAL(T, OP)                                                     \
  template cudaError_t gpuscan::kernels::CanonicalScan<T, gpuscan::ops::OP<T>>(                  \
      void*, std::size_t&, const T*, T*, uint64_t, uint64_t, bool, gpuscan::kernels::CanonicalState<T>*, \
      cudaStream_t);
