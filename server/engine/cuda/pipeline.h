// The per-sub-chunk steps every CUDA session shares (stage, upload, kernel, download, retire)
// and RunPipelined, which streams a call's elements through a staging pair's two slots.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>

#include "engine/cuda/staging.h"
#include "engine/engine.h"
#include "gpuscan/kernels/scan.h"

namespace gpuscan::engine::cuda {

// The per-sub-chunk steps every session shares.
// Pageable memory (protobuf bytes) is staged into the slot's pinned buffer first; registered
// memory (Engine::RegisterHost) is copied from directly.
inline const void* Staged(Shared& sh, const void* src, size_t bytes, const cuda::PinnedBuffer& staging) {
  if (sh.Pinned(src, bytes)) return src;
  std::memcpy(staging.get(), src, bytes);
  return staging.get();
}

// Uploads the values to d_in and, when `side` is set, side_bytes of a second input beside them
// (compaction's flags, a segmented scan's keys) through `side_staging` to `side_dst`.
inline void Upload(Shared& sh, Slot& s, const void* src, size_t bytes, const void* side, size_t side_bytes,
            const cuda::PinnedBuffer& side_staging, void* side_dst) {
  const void* from = Staged(sh, src, bytes, s.h_in);
  const void* side_from = side ? Staged(sh, side, side_bytes, side_staging) : nullptr;
  sh.Call(cudaEventRecord(s.start.get(), s.s()), "cudaEventRecord");
  sh.Call(cudaMemcpyAsync(s.d_in.get(), from, bytes, cudaMemcpyHostToDevice, s.s()), "H2D values");
  if (side) {
    sh.Call(cudaMemcpyAsync(side_dst, side_from, side_bytes, cudaMemcpyHostToDevice, s.s()), "H2D flags or keys");
  }
  sh.Call(cudaEventRecord(s.h2d_done.get(), s.s()), "cudaEventRecord");
}

inline void Upload(Shared& sh, Slot& s, const void* src, size_t bytes, const uint8_t* flags, size_t flag_bytes) {
  Upload(sh, s, src, bytes, flags, flag_bytes, s.h_flags, s.d_flags.get());
}

inline void KernelBegin(Shared& sh, StagingPair& pair, Slot& s) {
  if (pair.last_kernel) sh.Call(cudaStreamWaitEvent(s.s(), pair.last_kernel, 0), "cudaStreamWaitEvent");
  sh.Call(cudaEventRecord(s.kernel_start.get(), s.s()), "cudaEventRecord");
}

inline void KernelEnd(Shared& sh, StagingPair& pair, Slot& s) {
  sh.Call(cudaGetLastError(), "kernel launch");
  sh.Call(cudaEventRecord(s.kernel_done.get(), s.s()), "cudaEventRecord");
  pair.last_kernel = s.kernel_done.get();
}

inline void Download(Shared& sh, Slot& s, char* dst, size_t bytes) {
  const bool direct = bytes && sh.Pinned(dst, bytes);  // registered: no copy out of staging
  if (bytes) {
    sh.Call(cudaMemcpyAsync(direct ? dst : s.h_out.get(), s.d_out.get(), bytes, cudaMemcpyDeviceToHost, s.s()),
            "D2H");
  }
  sh.Call(cudaEventRecord(s.d2h_done.get(), s.s()), "cudaEventRecord");
  s.busy = true;
  s.downloads = true;
  s.out_dst = dst;
  s.out_bytes = direct ? 0 : bytes;
}

// Waits for the slot's sub-chunk, hands its result over and adds its stage times.
inline void Retire(Shared& sh, Slot& s, StageTimes& times) {
  if (!s.busy) return;
  cudaEvent_t done = s.downloads ? s.d2h_done.get() : s.kernel_done.get();
  sh.Call(cudaEventSynchronize(done), "cudaEventSynchronize");
  if (s.out_bytes) std::memcpy(s.out_dst, s.h_out.get(), s.out_bytes);
  times.h2d_us += ElapsedUs(s.start.get(), s.h2d_done.get());
  times.kernel_us += ElapsedUs(s.kernel_start.get(), s.kernel_done.get());
  if (s.downloads) times.d2h_us += ElapsedUs(s.kernel_done.get(), s.d2h_done.get());
  s.busy = false;
  s.ticket = 0;
  s.downloads = false;
  s.out_bytes = 0;
}

// Elements of T per sub-chunk, when each also brings key_size bytes of keys (0: none).
template <class T>
uint64_t SubChunkElements(size_t key_size = 0) {
  const uint64_t sub = kSubChunkBytes / sizeof(T);
  return key_size ? std::min<uint64_t>(sub, kIndexBytes / key_size) : sub;
}

// Streams n elements of T through the pair's two slots: sub-chunk k+1's upload overlaps
// sub-chunk k's kernel and download. launch(slot, m) enqueues the kernel on slot.s() reading
// slot.d_in and (when out is non-null) writing slot.d_out, which is copied to out. With `keys`
// (key_size bytes per element), each sub-chunk's keys go to slot.d_idx (compaction's index
// buffers, which nothing else uses).
template <class T, class Launch>
void RunPipelined(Shared& sh, StagingPair& pair, const void* in, void* out, uint64_t n, StageTimes& times,
                  Launch launch, const void* keys = nullptr, size_t key_size = 0) {
  const uint64_t sub = SubChunkElements<T>(keys ? key_size : 0);
  const char* key_src = static_cast<const char*>(keys);
  const char* src = static_cast<const char*>(in);
  char* dst = static_cast<char*>(out);
  unsigned k = 0;
  for (uint64_t off = 0; off < n; off += sub, ++k) {
    const uint64_t m = std::min(sub, n - off);
    Slot& s = pair.slots[k & 1];
    Retire(sh, s, times);
    Upload(sh, s, src + off * sizeof(T), m * sizeof(T), keys ? key_src + off * key_size : nullptr, m * key_size,
           s.h_idx, s.d_idx.get());
    KernelBegin(sh, pair, s);
    launch(s, m);
    KernelEnd(sh, pair, s);
    if (dst) {
      Download(sh, s, dst + off * sizeof(T), m * sizeof(T));
    } else {
      s.busy = true;  // retired on its kernel's completion
    }
  }
  Retire(sh, pair.slots[0], times);
  Retire(sh, pair.slots[1], times);
}

// Both ends in registered host memory (shared-memory regions): no staging and no host wait per
// sub-chunk. Uploads queue on slot 0's stream, kernels on slot 1's, downloads on the ring's own,
// through four device buffers (each slot's d_in and d_out, each run in place); a buffer is
// uploaded into again once its download (or, with no `out`, its kernel) is done. So both copy
// engines stay busy and the link carries both directions at once; RunPipelined's two slots wait
// on the host for each download before the next upload (about 60% of the link on the H100).
// launch(d_buf, m, stream) enqueues the kernel on `stream` over m elements of d_buf, in place.
// Stage times are spans: first upload to last, first kernel to last, first download to last.
template <class T, class Launch>
void RunDirect(Shared& sh, StagingPair& pair, const void* in, void* out, uint64_t n, StageTimes& times,
               Launch launch) {
  using Ring = StagingPair::Ring;
  if (!pair.ring) pair.ring = std::make_unique<Ring>();
  Ring& r = *pair.ring;
  cudaStream_t up = pair.slots[0].s(), run = pair.slots[1].s(), down = r.download.get();
  void* buffers[Ring::kBuffers] = {pair.slots[0].d_in.get(), pair.slots[0].d_out.get(), pair.slots[1].d_in.get(),
                                   pair.slots[1].d_out.get()};
  const uint64_t sub = kSubChunkBytes / sizeof(T);
  const char* src = static_cast<const char*>(in);
  char* dst = static_cast<char*>(out);
  if (pair.last_kernel) sh.Call(cudaStreamWaitEvent(run, pair.last_kernel, 0), "cudaStreamWaitEvent");
  sh.Call(cudaEventRecord(r.h2d_start.get(), up), "cudaEventRecord");
  sh.Call(cudaEventRecord(r.kernel_start.get(), run), "cudaEventRecord");
  if (dst) sh.Call(cudaEventRecord(r.d2h_start.get(), down), "cudaEventRecord");
  unsigned k = 0;
  for (uint64_t off = 0; off < n; off += sub, ++k) {
    const uint64_t m = std::min(sub, n - off);
    const size_t bytes = m * sizeof(T);
    const unsigned i = k % Ring::kBuffers;
    if (k >= Ring::kBuffers) {
      sh.Call(cudaStreamWaitEvent(up, dst ? r.freed[i].get() : r.ran[i].get(), 0), "cudaStreamWaitEvent");
    }
    sh.Call(cudaMemcpyAsync(buffers[i], src + off * sizeof(T), bytes, cudaMemcpyHostToDevice, up), "H2D values");
    sh.Call(cudaEventRecord(r.uploaded[i].get(), up), "cudaEventRecord");
    sh.Call(cudaStreamWaitEvent(run, r.uploaded[i].get(), 0), "cudaStreamWaitEvent");
    launch(static_cast<T*>(buffers[i]), m, run);
    sh.Call(cudaGetLastError(), "kernel launch");
    sh.Call(cudaEventRecord(r.ran[i].get(), run), "cudaEventRecord");
    if (dst) {
      sh.Call(cudaStreamWaitEvent(down, r.ran[i].get(), 0), "cudaStreamWaitEvent");
      sh.Call(cudaMemcpyAsync(dst + off * sizeof(T), buffers[i], bytes, cudaMemcpyDeviceToHost, down), "D2H");
      sh.Call(cudaEventRecord(r.freed[i].get(), down), "cudaEventRecord");
    }
  }
  sh.Call(cudaEventRecord(r.h2d_end.get(), up), "cudaEventRecord");
  sh.Call(cudaEventRecord(r.kernel_end.get(), run), "cudaEventRecord");
  if (dst) sh.Call(cudaEventRecord(r.d2h_end.get(), down), "cudaEventRecord");
  // Every upload precedes a kernel and every kernel its download: the last event covers them all.
  sh.Call(cudaEventSynchronize(dst ? r.d2h_end.get() : r.kernel_end.get()), "cudaEventSynchronize");
  sh.Call(cudaEventSynchronize(r.h2d_end.get()), "cudaEventSynchronize");
  times.h2d_us += ElapsedUs(r.h2d_start.get(), r.h2d_end.get());
  times.kernel_us += ElapsedUs(r.kernel_start.get(), r.kernel_end.get());
  if (dst) times.d2h_us += ElapsedUs(r.d2h_start.get(), r.d2h_end.get());
  pair.last_kernel = nullptr;  // every kernel of the pair is done
}

// The stage times of a call run one step at a time on `s`'s stream (upload, kernels, download;
// not RunPipelined's sub-chunks), once its events have completed: start -> h2d_done -> kernel_done
// -> d2h_done.
inline void AddStepTimes(Slot& s, StageTimes& times) {
  times.h2d_us += ElapsedUs(s.start.get(), s.h2d_done.get());
  times.kernel_us += ElapsedUs(s.h2d_done.get(), s.kernel_done.get());
  times.d2h_us += ElapsedUs(s.kernel_done.get(), s.d2h_done.get());
}

// A session's running carry, on the device, from the pool.
template <class T>
class DeviceCarry {
 public:
  // Allocates on first use, in `stream`'s order. A few bytes per session: not counted against
  // --device-memory-limit, which bounds the pairs and temporary storage.
  T* get(cudaStream_t stream) {
    if (!buffer_.get()) buffer_ = cuda::DeviceBuffer(sizeof(T), stream);
    return ptr();
  }
  T* ptr() const { return static_cast<T*>(buffer_.get()); }
  bool valid = false;  // holds the combination of everything processed so far

 private:
  cuda::DeviceBuffer buffer_;
};

// Arrays already on the device (a caller's, through CUDA IPC): no copies. launch(stream) enqueues
// the kernels on slot 0's stream; this waits for them and adds their time.
template <class Launch>
void RunOnDevice(Shared& sh, StagingPair& pair, StageTimes& times, Launch&& launch) {
  Slot& s = pair.slots[0];
  KernelBegin(sh, pair, s);
  launch(s.s());
  KernelEnd(sh, pair, s);
  sh.Call(cudaEventSynchronize(s.kernel_done.get()), "cudaEventSynchronize");
  times.kernel_us += ElapsedUs(s.kernel_start.get(), s.kernel_done.get());
  pair.last_kernel = nullptr;  // done
}

class DeviceGuard {
 public:
  explicit DeviceGuard(Shared& sh) { sh.Call(cudaSetDevice(sh.device), "cudaSetDevice"); }
};

}  // namespace gpuscan::engine::cuda
