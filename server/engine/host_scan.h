// Host-side pieces of a scan shared by the CPU engine and the CUDA engine's small-chunk path:
// element loads and stores on raw (possibly unaligned) bytes, the sequential scan of a range,
// and the kernel-stage timer.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstring>

#include "engine/engine.h"

namespace gpuscan::engine::host {

template <class T>
T Load(const unsigned char* p, uint64_t i) {
  T v;
  std::memcpy(&v, p + i * sizeof(T), sizeof(T));
  return v;
}

template <class T>
void Store(unsigned char* p, uint64_t i, T v) {
  std::memcpy(p + i * sizeof(T), &v, sizeof(T));
}

// Adds the time from construction to destruction to times.kernel_us.
class KernelTimer {
 public:
  explicit KernelTimer(StageTimes& times) : times_(times), start_(Clock::now()) {}
  ~KernelTimer() {
    times_.kernel_us += static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start_).count());
  }
  KernelTimer(const KernelTimer&) = delete;
  KernelTimer& operator=(const KernelTimer&) = delete;

 private:
  using Clock = std::chrono::steady_clock;
  StageTimes& times_;
  Clock::time_point start_;
};

// Scans elements [begin, end) starting from `running`; returns the running value after the
// last element (what the next element continues from). `in` and `out` may alias.
template <class T, class Op, bool kExclusive>
T ScanRange(const unsigned char* in, unsigned char* out, uint64_t begin, uint64_t end, T running) {
  const Op op;
  for (uint64_t i = begin; i < end; ++i) {
    const T x = Load<T>(in, i);
    if constexpr (kExclusive) {
      Store(out, i, running);
      running = op(running, x);
    } else {
      running = op(running, x);
      Store(out, i, running);
    }
  }
  return running;
}

}  // namespace gpuscan::engine::host
