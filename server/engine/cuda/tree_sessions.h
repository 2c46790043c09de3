// The deterministic float SUM / PRODUCT sessions (the canonical tree), shared by the scan,
// reduce and segmented-scan families.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "engine/cuda/pipeline.h"
#include "engine/cpu_engine.h"
#include "engine/dispatch.h"
#include "engine/host_scan.h"
#include "engine/reduce_by_key.h"
#include "engine/segmented_scan.h"
#include "gpuscan/kernels/canonical_scan.h"
#include "gpuscan/kernels/canonical_tree.h"

namespace gpuscan::engine::cuda {

// ---------------------------------------------------------------------------------------------
// Deterministic float SUM / PRODUCT (issue 11): the canonical tree of canonical_tree.h. The
// partial tiles at a chunk's edges (< 4096 elements each) are computed on the host with the
// CPU engine's code; the whole tiles between them on the device (kernels::CanonicalScan), with
// the tree state uploaded before and read back after. Both compute the same operations, so
// the bits do not depend on where a tile ran.

// The tree state on the device before a run of whole tiles (stream-ordered on s0; the host
// copy is staged before this returns) and back on the host after it (waits for s0).
template <class T, class Op>
kernels::CanonicalState<T>* PutState(Shared& sh, cuda::DeviceBuffer& d_state, const canon::TreeState<T, Op>& state,
                                     cudaStream_t s0) {
  using DevState = kernels::CanonicalState<T>;
  if (!d_state.get()) d_state = cuda::DeviceBuffer(sizeof(DevState), s0);
  auto* dev = static_cast<DevState*>(d_state.get());
  DevState h{};
  std::memcpy(h.aggs, state.aggs, sizeof(h.aggs));
  h.carry = state.carry.value;
  h.has_carry = state.carry.has ? 1 : 0;
  sh.Call(cudaMemcpyAsync(dev, &h, sizeof(h), cudaMemcpyHostToDevice, s0), "H2D canonical state");
  return dev;
}

template <class T, class Op>
void TakeState(Shared& sh, const kernels::CanonicalState<T>* dev, canon::TreeState<T, Op>& state, uint64_t tiles,
               cudaStream_t s0) {
  kernels::CanonicalState<T> h{};
  sh.Call(cudaMemcpyAsync(&h, dev, sizeof(h), cudaMemcpyDeviceToHost, s0), "D2H canonical state");
  sh.Call(cudaStreamSynchronize(s0), "cudaStreamSynchronize");
  std::memcpy(state.aggs, h.aggs, sizeof(h.aggs));
  state.carry = {h.has_carry != 0, h.carry};
  state.tiles += tiles;
}

template <class T, class Op>
void PrepareCanonicalTemp(Shared& sh, StagingPair& pair, uint64_t tiles, bool exclusive) {
  size_t temp_bytes = 0;
  sh.Call(kernels::CanonicalScan<T, Op>(nullptr, temp_bytes, nullptr, nullptr, tiles, 0, exclusive, nullptr,
                                        pair.slots[0].s()),
          "canonical scan temp size");
  pair.EnsureTemp(temp_bytes);
}

// Runs `tiles` whole tiles through the pair's pipeline (sub-chunks are whole tiles too:
// kSubChunkBytes / sizeof(T) is a multiple of 4096), continuing and then updating `state`.
// dst == nullptr: a reduction (aggregates only).
template <class T, class Op>
void RunCanonicalTiles(Shared& sh, cuda::DeviceBuffer& d_state, canon::TreeState<T, Op>& state, const void* src,
                       void* dst, uint64_t tiles, bool exclusive, StageTimes& times) {
  static_assert((kSubChunkBytes / sizeof(T)) % canon::kTileItems == 0, "sub-chunks must be whole tiles");
  DeviceGuard guard(sh);
  StagingLease pair(sh);
  cudaStream_t s0 = pair->slots[0].s();
  PrepareCanonicalTemp<T, Op>(sh, *pair, std::min<uint64_t>(tiles, kSubChunkBytes / sizeof(T) / canon::kTileItems),
                              exclusive);
  // Slot 0 runs the first kernel, which is thereby ordered after the state's upload.
  auto* dev = PutState(sh, d_state, state, s0);
  uint64_t done = 0;
  RunPipelined<T>(sh, *pair, src, dst, tiles * canon::kTileItems, times, [&](Slot& s, uint64_t m) {
    const uint64_t t = m / canon::kTileItems;
    size_t bytes = pair->temp.size();
    sh.Call(kernels::CanonicalScan<T, Op>(pair->temp.get(), bytes, static_cast<const T*>(s.d_in.get()),
                                          dst ? static_cast<T*>(s.d_out.get()) : nullptr, t, state.tiles + done,
                                          exclusive, dev, s.s()),
            "canonical scan kernel");
    done += t;
  });
  if (pair->last_kernel) sh.Call(cudaStreamWaitEvent(s0, pair->last_kernel, 0), "cudaStreamWaitEvent");
  TakeState(sh, dev, state, tiles, s0);
}

// The same for tiles already on the device (a caller's, through CUDA IPC): one kernel over
// them, no copies.
template <class T, class Op>
void RunCanonicalTilesOnDevice(Shared& sh, cuda::DeviceBuffer& d_state, canon::TreeState<T, Op>& state,
                               const void* d_src, void* d_dst, uint64_t tiles, bool exclusive, StageTimes& times) {
  DeviceGuard guard(sh);
  StagingLease pair(sh);
  cudaStream_t s0 = pair->slots[0].s();
  PrepareCanonicalTemp<T, Op>(sh, *pair, tiles, exclusive);
  auto* dev = PutState(sh, d_state, state, s0);
  RunOnDevice(sh, *pair, times, [&](cudaStream_t stream) {
    size_t bytes = pair->temp.size();
    sh.Call(kernels::CanonicalScan<T, Op>(pair->temp.get(), bytes, static_cast<const T*>(d_src),
                                          static_cast<T*>(d_dst), tiles, state.tiles, exclusive, dev, stream),
            "canonical scan kernel");
  });
  TakeState(sh, dev, state, tiles, s0);
}

// The last elements of a device array, < one tile, copied to the host (or back) for the host's
// part of the tree.
inline void CopyTail(Shared& sh, void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  if (bytes) sh.Call(cudaMemcpy(dst, src, bytes, kind), "tile tail copy");
}

template <class T, class Op, bool kExclusive>
class CudaTreeScan final : public ScanSession {
 public:
  explicit CudaTreeScan(std::shared_ptr<Shared> sh) : sh_(std::move(sh)) {}

  void Process(const void* in, void* out, uint64_t n, StageTimes& times) override {
    if (n == 0) return;
    const auto* src = static_cast<const unsigned char*>(in);
    auto* dst = static_cast<unsigned char*>(out);
    // The edge tiles' host time counts as kernel time; the whole tiles' device stages are
    // added by RunPipelined, so their wall time is taken out.
    uint64_t device_us = 0;
    const auto start = std::chrono::steady_clock::now();
    canon::ScanChunk<T, Op>(cur_, src, dst, n, kExclusive,
                            [&](const unsigned char* s, unsigned char* d, uint64_t tiles) {
                              const auto t0 = std::chrono::steady_clock::now();
                              RunCanonicalTiles<T, Op>(*sh_, d_state_, cur_.state, s, d, tiles, kExclusive, times);
                              device_us += static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(
                                                                     std::chrono::steady_clock::now() - t0)
                                                                     .count());
                            });
    const auto all_us = static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - start).count());
    times.kernel_us += all_us > device_us ? all_us - device_us : 0;  // host-computed edge tiles
  }

  // Whole tiles on the device where the array lies, the partial last tile on the host (both
  // compute the same operations, so the bits are the streamed scan's).
  void ProcessDevice(const void* in, void* out, uint64_t n, StageTimes& times) override {
    if (n == 0) return;
    const uint64_t tiles = n / canon::kTileItems, head = tiles * canon::kTileItems, tail = n - head;
    std::vector<unsigned char> tail_in(tail * sizeof(T)), tail_out(tail * sizeof(T));
    DeviceGuard guard(*sh_);
    CopyTail(*sh_, tail_in.data(), static_cast<const T*>(in) + head, tail_in.size(), cudaMemcpyDeviceToHost);
    if (tiles) RunCanonicalTilesOnDevice<T, Op>(*sh_, d_state_, cur_.state, in, out, tiles, kExclusive, times);
    if (tail) {
      canon::ScanChunk<T, Op>(cur_, tail_in.data(), tail_out.data(), tail, kExclusive,
                              [](const unsigned char*, unsigned char*, uint64_t) {});  // < one tile: no whole one
      CopyTail(*sh_, static_cast<T*>(out) + head, tail_out.data(), tail_out.size(), cudaMemcpyHostToDevice);
    }
  }

  std::string algorithm() const override { return "deterministic"; }
  // Small and within the partial tile: ScanChunk runs no whole tile on the device.
  bool on_host(uint64_t n) const override {
    if (n * sizeof(T) > kSmallChunkBytes) return false;
    const uint64_t fill = cur_.left_n > 0 ? std::min<uint64_t>(n, canon::kTileItems - cur_.left_n) : 0;
    return (n - fill) < canon::kTileItems;
  }

 private:
  std::shared_ptr<Shared> sh_;
  canon::Cursor<T, Op> cur_;
  cuda::DeviceBuffer d_state_;
};

template <class T, class Op>
class CudaTreeReduce final : public ReduceSession {
 public:
  explicit CudaTreeReduce(std::shared_ptr<Shared> sh) : sh_(std::move(sh)) {}

  void Process(const void* in, uint64_t n, StageTimes& times) override {
    if (n == 0) return;
    canon::ReduceChunk<T, Op>(cur_, static_cast<const unsigned char*>(in), n,
                              [&](const unsigned char* s, uint64_t tiles) {
                                RunCanonicalTiles<T, Op>(*sh_, d_state_, cur_.state, s, nullptr, tiles, false, times);
                              });
  }

  // Whole tiles but the last on the device, the last 1..4096 elements on the host (a reduce
  // keeps them: ReduceChunk).
  void ProcessDevice(const void* in, uint64_t n, StageTimes& times) override {
    if (n == 0) return;
    const uint64_t tiles = (n - 1) / canon::kTileItems, head = tiles * canon::kTileItems;
    std::vector<unsigned char> rest((n - head) * sizeof(T));
    DeviceGuard guard(*sh_);
    CopyTail(*sh_, rest.data(), static_cast<const T*>(in) + head, rest.size(), cudaMemcpyDeviceToHost);
    if (tiles) RunCanonicalTilesOnDevice<T, Op>(*sh_, d_state_, cur_.state, in, nullptr, tiles, false, times);
    canon::ReduceChunk<T, Op>(cur_, rest.data(), n - head, [](const unsigned char*, uint64_t) {});
  }

  void Result(void* value) const override {
    const T v = canon::ReduceResult(cur_);
    std::memcpy(value, &v, sizeof(T));
  }
  std::string algorithm() const override { return "deterministic"; }

 private:
  std::shared_ptr<Shared> sh_;
  canon::Cursor<T, Op> cur_;
  cuda::DeviceBuffer d_state_;
};

}  // namespace gpuscan::engine::cuda
