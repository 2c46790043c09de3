// tune_bench: the figures behind kernels/src/detail/tuning.cuh for the issue-4 targets, in one
// run (CUDA events, warm-up, median of 25; inputs rotate through a 4 GiB pool so that timings
// are of HBM, not of the 50 MB L2):
//   scan:    the default (decoupled look-back) vs cub::DeviceScan::InclusiveSum and a device copy,
//            int32 and float32 sum, every power of two 2^16..2^30; look-back delay thresholds.
//   reduce:  Reduce(own) vs cub::DeviceReduce::Sum, int32/float32/int64/float64, 2^20..2^28,
//            plus candidate policies; floats checked bit-identical run to run.
//   compact: Compact(own) vs cub::DeviceSelect::Flagged, float32 by flags (half kept), plus
//            candidate policies.
// Every timed output is checked against CUB's (integers and compaction: exact).
//
//   widen:   the widening scans (scan_widen.h): int8 -> int64 exclusive (look-back: tile shapes
//            and sleeps) and float16 -> float32 inclusive (canonical one pass: stages, the
//            float16 conversion), against CUB over a converting transform iterator and a copy.
//
// Usage: tune_bench [scan|scan8|det|reduce|compact|widen ...] (default: all; scan8: int64 and
// float64 scans; det: the deterministic scan's tiles a block and persistent blocks)
#include <cuda_fp16.h>
#include <thrust/iterator/transform_iterator.h>

#include <cub/device/device_reduce.cuh>
#include <cub/device/device_scan.cuh>
#include <cub/device/device_select.cuh>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "detail/dispatch_canonical.cuh"
#include "detail/dispatch.cuh"
#include "detail/scan_widen_impl.cuh"
#include "gpuscan/kernels/compact.h"
#include "gpuscan/kernels/half.h"
#include "gpuscan/kernels/reduce.h"
#include "gpuscan/kernels/scan.h"
#include "gpuscan/kernels/testing.h"

// float16 inputs converted by the hardware alone (cvt.f32.f16: NaN payloads dropped), and by
// integer operations (HalfBitsToFloat, the device's conversion before 2026-11-27): tags for the
// widening scan's candidates (BenchWiden). The default (Float16) is the hardware's with NaN
// payloads put back (scan_widen.h).
namespace tune {
struct HwHalf {
  uint16_t bits;
};
struct BitHalf {
  uint16_t bits;
};
}  // namespace tune
template <>
struct gpuscan::kernels::Widen<tune::HwHalf, float> {
  __host__ __device__ static float Convert(tune::HwHalf x) {
#if defined(__CUDA_ARCH__)
    return __half2float(__ushort_as_half(x.bits));
#else
    return gpuscan::half::HalfToFloat(x.bits);
#endif
  }
};
template <>
struct gpuscan::kernels::Widen<tune::BitHalf, float> {
  __host__ __device__ static float Convert(tune::BitHalf x) { return gpuscan::kernels::HalfBitsToFloat(x.bits); }
};

namespace {

using namespace gpuscan;
using kernels::ScanAlgorithm;
namespace kd = kernels::detail;

#define CHECK(expr)                                                                              \
  do {                                                                                           \
    const cudaError_t e_ = (expr);                                                               \
    if (e_ != cudaSuccess) {                                                                     \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #expr, cudaGetErrorString(e_)); \
      std::exit(1);                                                                              \
    }                                                                                            \
  } while (0)

constexpr int kWarmup = 3;
constexpr int kReps = 25;
constexpr uint64_t kPoolBytes = 4ull << 30;  // per buffer

template <class T>
__global__ void FillKernel(T* p, uint64_t n, uint64_t seed) {
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < n; i += uint64_t(gridDim.x) * blockDim.x) {
    uint64_t z = (i + seed) * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z ^= z >> 31;
    if constexpr (std::is_same_v<T, uint8_t>) {
      p[i] = uint8_t(z & 1);
    } else if constexpr (std::is_floating_point_v<T>) {
      p[i] = T(double(z >> 11) * (1.0 / 9007199254740992.0) * 2.0 - 1.0);
    } else {
      p[i] = T(z % 1000) - T(500);
    }
  }
}

template <class T>
__global__ void CountMismatchKernel(const T* a, const T* b, uint64_t n, unsigned long long* bad) {
  unsigned long long mine = 0;
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < n; i += uint64_t(gridDim.x) * blockDim.x) {
    const T x = a[i], y = b[i];
    if constexpr (std::is_floating_point_v<T>) {
      // Scan outputs of inputs in [-1, 1): rounding differences grow at most like eps * (i + 1).
      const double d = double(x) - double(y), tol = 1e-3 + 4.8e-7 * double(i + 1);
      if (!(d <= tol && d >= -tol)) ++mine;
    } else {
      if (x != y) ++mine;
    }
  }
  if (mine) atomicAdd(bad, mine);
}

double MedianUs(const std::function<void(int)>& f, cudaStream_t s) {
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  for (int i = 0; i < kWarmup; ++i) f(i);
  std::vector<float> ms;
  for (int i = 0; i < kReps; ++i) {
    CHECK(cudaEventRecord(a, s));
    f(kWarmup + i);
    CHECK(cudaEventRecord(b, s));
    CHECK(cudaEventSynchronize(b));
    float t = 0;
    CHECK(cudaEventElapsedTime(&t, a, b));
    ms.push_back(t);
  }
  CHECK(cudaEventDestroy(a));
  CHECK(cudaEventDestroy(b));
  std::sort(ms.begin(), ms.end());
  return 1000.0 * ms[ms.size() / 2];
}

// Offset (elements) of the rep-th input so that consecutive reps touch different memory.
uint64_t Rotate(uint64_t n, uint64_t pool, int rep) {
  if (n * 2 > pool) return 0;
  const uint64_t slots = pool / n;
  return (uint64_t(rep) % slots) * n;
}

struct Ctx {
  char* in = nullptr;
  char* out = nullptr;
  char* ref = nullptr;
  void* tmp = nullptr;
  std::size_t tmp_bytes = 256ull << 20;
  unsigned long long* d_bad = nullptr;
  cudaStream_t s{};
};

void Row(const std::string& what, uint64_t n, double us, double bytes, double copy_us, double cub_us,
         const std::string& check) {
  std::printf("%-44s %11llu %10.2f %9.1f %7.1f%% %8.3f %s\n", what.c_str(), (unsigned long long)n, us,
              bytes / us / 1e3, copy_us > 0 ? 100.0 * copy_us / us : 0.0, cub_us / us, check.c_str());
  std::fflush(stdout);
}

void Header(const char* title) {
  std::printf("\n== %s\n%-44s %11s %10s %9s %8s %8s %s\n", title, "what", "n", "time_us", "GB/s", "%copy", "xCUB",
              "check");
}

template <class T>
unsigned long long Mismatches(const T* a, const T* b, uint64_t n, Ctx& c) {
  CHECK(cudaMemsetAsync(c.d_bad, 0, 8, c.s));
  CountMismatchKernel<T><<<1024, 256, 0, c.s>>>(a, b, n, c.d_bad);
  CHECK(cudaGetLastError());
  unsigned long long bad = 0;
  CHECK(cudaMemcpyAsync(&bad, c.d_bad, 8, cudaMemcpyDeviceToHost, c.s));
  CHECK(cudaStreamSynchronize(c.s));
  return bad;
}

std::string Verdict(unsigned long long bad) { return bad == 0 ? "ok" : "MISMATCH " + std::to_string(bad); }

double CopyUs(Ctx& c, uint64_t bytes) {
  return MedianUs([&](int r) {
    const uint64_t o = Rotate(bytes, kPoolBytes, r);
    CHECK(cudaMemcpyAsync(c.out + o, c.in + o, bytes, cudaMemcpyDeviceToDevice, c.s));
  }, c.s);
}

// ---------------------------------------------------------------------------------------------
// Scan.
template <class T, int kThreads, int kItems, int kFirst, int kPoll, int kMinTiles>
cudaError_t PolicyScan(void* tmp, std::size_t& bytes, const T* in, T* out, uint64_t n, cudaStream_t s) {
  using P = kd::SinglePassPolicy<kThreads, kItems, true, kFirst, kPoll, kMinTiles>;
  return kd::SinglePassScan<T, ops::Sum<T>, P, false>(tmp, bytes, in, out, n, false, nullptr, nullptr, s);
}

// The register kernel as the look-back scan ran it before 2026-11-26 (ScanTuning), and the
// kernel with its tile in shared memory (agent_single_pass_bulk.cuh), the default since.
template <class T>
cudaError_t RegisterScan(void* tmp, std::size_t& bytes, const T* in, T* out, uint64_t n, cudaStream_t s) {
  using P = kd::ScanTuning<kd::kTunedArch, sizeof(T)>;
  return kd::SinglePassScan<T, ops::Sum<T>, P, false>(tmp, bytes, in, out, n, false, nullptr, nullptr, s);
}
template <class T, int kThreads, int kItems, int kFirst, int kPoll>
cudaError_t BulkScan(void* tmp, std::size_t& bytes, const T* in, T* out, uint64_t n, cudaStream_t s) {
  using P = kd::SinglePassPolicy<kThreads, kItems, true, kFirst, kPoll, 500>;
  return kd::SinglePassScan<T, ops::Sum<T>, P, false, true>(tmp, bytes, in, out, n, false, nullptr, nullptr, s);
}

// The scan tables' shared parts: the input pool filled with T, and at each size the rows of a
// device copy and of cub::DeviceScan::InclusiveSum (its result left in cub_out when given).
template <class T>
T* FillScanInput(Ctx& c) {
  T* in = reinterpret_cast<T*>(c.in);
  FillKernel<T><<<4096, 256, 0, c.s>>>(in, kPoolBytes / sizeof(T), sizeof(T) == 4 ? 1 : 3);
  CHECK(cudaGetLastError());
  return in;
}

struct PeerTimes {
  double copy_us, cub_us;
};

template <class T>
PeerTimes CopyAndCubRows(const char* dtype, uint64_t n, const T* in, T* out, T* cub_out, Ctx& c) {
  const uint64_t pe = kPoolBytes / sizeof(T);
  const double bytes = 2.0 * double(n) * sizeof(T);
  const double copy_us = CopyUs(c, n * sizeof(T));
  std::size_t cb = 0;
  CHECK(cub::DeviceScan::InclusiveSum(nullptr, cb, in, out, static_cast<int64_t>(n), c.s));
  if (cb > c.tmp_bytes) { std::fprintf(stderr, "temp too small for CUB\n"); std::exit(1); }
  const double cub_us = MedianUs([&](int r) {
    CHECK(cub::DeviceScan::InclusiveSum(c.tmp, cb, in + Rotate(n, pe, r), out + Rotate(n, pe, r), static_cast<int64_t>(n), c.s));
  }, c.s);
  if (cub_out != nullptr) CHECK(cub::DeviceScan::InclusiveSum(c.tmp, cb, in, cub_out, static_cast<int64_t>(n), c.s));
  CHECK(kernels::ClearTempStorage(c.tmp, c.tmp_bytes, c.s));  // CUB scribbled on it
  Row(std::string("copy d2d ") + dtype, n, copy_us, bytes, copy_us, copy_us, "");
  Row(std::string("cub::DeviceScan::InclusiveSum ") + dtype, n, cub_us, bytes, copy_us, cub_us, "");
  return {copy_us, cub_us};
}

template <class T>
void BenchScan(const char* dtype, Ctx& c) {
  Header((std::string("scan ") + dtype + " sum (inclusive)").c_str());
  T* in = FillScanInput<T>(c);
  T* out = reinterpret_cast<T*>(c.out);
  T* ref = reinterpret_cast<T*>(c.ref);
  const uint64_t pe = kPoolBytes / sizeof(T);
  for (int lg = 16; lg <= (sizeof(T) == 4 ? 30 : 29); ++lg) {  // 8-byte 2^30 is past the pool
    const uint64_t n = 1ull << lg;
    const double bytes = 2.0 * double(n) * sizeof(T);
    const PeerTimes peers = CopyAndCubRows(dtype, n, in, out, ref, c);
    const double copy_us = peers.copy_us, cub_us = peers.cub_us;
    auto timed = [&](const std::string& name, auto fn) {
      std::size_t b = 0;
      CHECK(fn(nullptr, b, in, out, n, c.s));
      if (b > c.tmp_bytes) { std::fprintf(stderr, "temp too small\n"); std::exit(1); }
      const double us = MedianUs([&](int r) { CHECK(fn(c.tmp, b, in + Rotate(n, pe, r), out + Rotate(n, pe, r), n, c.s)); }, c.s);
      CHECK(cudaMemsetAsync(out, 0xFF, n * sizeof(T), c.s));
      CHECK(fn(c.tmp, b, in, out, n, c.s));
      Row(name + " " + dtype, n, us, bytes, copy_us, cub_us, Verdict(Mismatches(out, ref, n, c)));
    };
    timed("decoupled_lookback (default)", [](void* t, std::size_t& b, const T* i, T* o, uint64_t m, cudaStream_t s) {
      return kernels::Scan<T, ops::Sum<T>>(ScanAlgorithm::kDecoupledLookback, t, b, i, o, m, false, nullptr, nullptr, s);
    });
    timed("  register kernel (default before 2026-11-26)", RegisterScan<T>);
    if (lg == 16 || lg == 20 || lg == 24 || lg >= 28) {  // the bulk kernel's runners-up
      if constexpr (sizeof(T) == 4) {
        timed("  bulk 128x32 d2400/600 (below 2^26)", BulkScan<T, 128, 32, 2400, 600>);
        timed("  bulk 256x32 d2400/600 (from 2^26)", BulkScan<T, 256, 32, 2400, 600>);
        timed("  bulk 128x64 d2400/600", BulkScan<T, 128, 64, 2400, 600>);
        if (lg >= 28) timed("  bulk 256x32 d1600/400", BulkScan<T, 256, 32, 1600, 400>);  // the H200's bandwidth
      } else {
        timed("  bulk 128x16 d2400/1200", BulkScan<T, 128, 16, 2400, 1200>);
        if (lg >= 28) timed("  bulk 128x32 d1600/800", BulkScan<T, 128, 32, 1600, 800>);
      }
    }
    if (sizeof(T) == 4 && lg >= 17 && lg <= 23) {
      timed("  128x32 d1200/600 delays from 0 tiles", PolicyScan<T, 128, 32, 1200, 600, 0>);
      timed("  128x32 d1200/600 never delay", PolicyScan<T, 128, 32, 1200, 600, 1 << 30>);
      timed("  256x16 d1200/600 from 500", PolicyScan<T, 256, 16, 1200, 600, 500>);
    }
    // The policies before 2026-11-25 and the runners-up of that day's sweep (tuning.cuh).
    if (lg == 20 || lg == 24 || lg == 28 || lg == 29 || lg == 30) {
      if constexpr (sizeof(T) == 4) {
        timed("  128x32 d1200/600 (old)", PolicyScan<T, 128, 32, 1200, 600, 500>);
        timed("  128x32 d2400/1200", PolicyScan<T, 128, 32, 2400, 1200, 500>);
        if (lg >= 28) {  // longer tiles and more threads (the H200 scans at 84% of copy, 2026-11-25)
          timed("  128x32 d1200/300", PolicyScan<T, 128, 32, 1200, 300, 500>);
          timed("  128x48 d2400/600", PolicyScan<T, 128, 48, 2400, 600, 500>);
          timed("  128x64 d2400/600", PolicyScan<T, 128, 64, 2400, 600, 500>);
          timed("  256x32 d2400/600", PolicyScan<T, 256, 32, 2400, 600, 500>);
        }
      } else {
        timed("  128x16 d1200/600 (old)", PolicyScan<T, 128, 16, 1200, 600, 500>);
        timed("  128x32 d3200/1600", PolicyScan<T, 128, 32, 3200, 1600, 500>);
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// The deterministic scan (agent_canonical.cuh): tiles a persistent block keeps, and how many
// persistent blocks run, against CUB and a copy. The bits must not move: every variant is
// compared bit for bit with the default's output.
template <class T, int kStages>
cudaError_t StagesScan(void* tmp, std::size_t& bytes, const T* in, T* out, uint64_t n, kernels::CanonicalState<T>* st,
                       cudaStream_t s) {
  return kd::canonical::CanonicalScanImpl<T, ops::Sum<T>, kStages>(tmp, bytes, in, out, n / 4096, 0, false, st, s);
}

template <class T>
void BenchDeterministic(const char* dtype, Ctx& c) {
  using Bits = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
  Header((std::string("deterministic scan ") + dtype + " sum (inclusive)").c_str());
  T* in = FillScanInput<T>(c);
  T* out = reinterpret_cast<T*>(c.out);
  T* ref = reinterpret_cast<T*>(c.ref);
  const uint64_t pe = kPoolBytes / sizeof(T);
  kernels::CanonicalState<T>* st = nullptr;
  CHECK(cudaMalloc(&st, sizeof(*st)));
  int sms = 0;
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  for (int lg : {22, 24, 26, 28, sizeof(T) == 4 ? 30 : 29}) {
    const uint64_t n = 1ull << lg;
    const double bytes = 2.0 * double(n) * sizeof(T);
    const PeerTimes peers = CopyAndCubRows<T>(dtype, n, in, out, nullptr, c);
    const double copy_us = peers.copy_us, cub_us = peers.cub_us;
    auto timed = [&](const std::string& name, uint32_t blocks, auto fn, bool is_ref) {
      kernels::testing_hooks::SetMaxPersistentBlocks(blocks);
      std::size_t b = 0;
      CHECK(fn(nullptr, b, in, out, n, st, c.s));
      if (b > c.tmp_bytes) { std::fprintf(stderr, "temp too small\n"); std::exit(1); }
      const double us = MedianUs([&](int r) { CHECK(fn(c.tmp, b, in + Rotate(n, pe, r), out + Rotate(n, pe, r), n, st, c.s)); }, c.s);
      T* dst = is_ref ? ref : out;
      CHECK(cudaMemsetAsync(dst, 0xFF, n * sizeof(T), c.s));
      CHECK(fn(c.tmp, b, in, dst, n, st, c.s));
      kernels::testing_hooks::SetMaxPersistentBlocks(0);
      Row(name + " " + dtype, n, us, bytes, copy_us, cub_us,
          is_ref ? "(reference bits)"
                 : Verdict(Mismatches(reinterpret_cast<const Bits*>(out), reinterpret_cast<const Bits*>(ref), n, c)));
    };
    constexpr int kDefault = kd::CanonicalTuning<kd::kTunedArch, sizeof(T)>::kStages;
    timed("deterministic (default: " + std::to_string(kDefault) + " tiles a block)", 0, StagesScan<T, kDefault>, true);
    timed("  2 tiles a block", 0, StagesScan<T, 2>, false);
    timed("  3 tiles a block", 0, StagesScan<T, 3>, false);
    for (int per_sm : {2, 3}) {
      timed("  " + std::to_string(kDefault) + " tiles, " + std::to_string(per_sm) + " blocks a SM", per_sm * sms,
            StagesScan<T, kDefault>, false);
    }
    timed("  default again", 0, StagesScan<T, kDefault>, false);
  }
  CHECK(cudaFree(st));
}

// ---------------------------------------------------------------------------------------------
// Widening scans. Bytes moved: n * (in + out); the copy row moves as many (half each way).
template <class In>
__global__ void FillNarrowKernel(In* p, uint64_t n, uint64_t seed) {
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < n; i += uint64_t(gridDim.x) * blockDim.x) {
    uint64_t z = (i + seed) * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z ^= z >> 31;
    if constexpr (sizeof(In) == 2) {
      p[i].bits = __half_as_ushort(__float2half_rn(float(int(z % 15) - 7)));  // sums exact in float32
    } else {
      p[i] = static_cast<In>(z);
    }
  }
}

__global__ void HardwareHalfKernel(float* out) {
  const uint32_t h = blockIdx.x * blockDim.x + threadIdx.x;
  out[h] = __half2float(__ushort_as_half(static_cast<unsigned short>(h)));
}

template <int kThreads, int kItems, int kFirst, int kPoll>
cudaError_t WidenIntScan(void* tmp, std::size_t& bytes, const int8_t* in, int64_t* out, uint64_t n, cudaStream_t s) {
  using P = kd::SinglePassPolicy<kThreads, kItems, true, kFirst, kPoll, 500>;
  return kd::SinglePassScan<int64_t, ops::Sum<int64_t>, P, false, true, int8_t>(tmp, bytes, in, out, n, true, nullptr,
                                                                               nullptr, s);
}
template <class Tag, int kStages>
cudaError_t WidenHalfScan(void* tmp, std::size_t& bytes, const kernels::Float16* in, float* out, uint64_t n,
                          cudaStream_t s) {
  return kd::canonical::WidenCanonicalScan<Tag, float, ops::Sum<float>, kStages>(
      tmp, bytes, reinterpret_cast<const Tag*>(in), out, n, false, nullptr, nullptr, s);
}

template <class In, class Out>
struct ToWide {
  __host__ __device__ Out operator()(In x) const {
    if constexpr (sizeof(In) == 2) {
#if defined(__CUDA_ARCH__)
      return __half2float(__ushort_as_half(x.bits));
#else
      return gpuscan::half::HalfToFloat(x.bits);
#endif
    } else {
      return static_cast<Out>(x);
    }
  }
};

template <class In, class Out>
void BenchWidenOne(const char* what, bool exclusive, std::initializer_list<int> lgs, Ctx& c,
                   const std::vector<std::pair<std::string, std::function<cudaError_t(void*, std::size_t&, const In*,
                                                                                      Out*, uint64_t, cudaStream_t)>>>&
                       variants) {
  using Bits = std::conditional_t<sizeof(Out) == 4, uint32_t, uint64_t>;
  Header(what);
  In* in = reinterpret_cast<In*>(c.in);
  Out* out = reinterpret_cast<Out*>(c.out);
  Out* ref = reinterpret_cast<Out*>(c.ref);
  FillNarrowKernel<In><<<4096, 256, 0, c.s>>>(in, kPoolBytes / sizeof(In), 11);
  CHECK(cudaGetLastError());
  for (int lg : lgs) {
    const uint64_t n = 1ull << lg;
    const double bytes = double(n) * (sizeof(In) + sizeof(Out));
    const double copy_us = CopyUs(c, n * (sizeof(In) + sizeof(Out)) / 2);
    auto cub_in = [](const In* x) { return thrust::make_transform_iterator(x, ToWide<In, Out>{}); };
    auto cub = [&](const In* x, Out* y, std::size_t& b, void* t) {
      return exclusive ? cub::DeviceScan::ExclusiveSum(t, b, cub_in(x), y, uint32_t(n), c.s)
                       : cub::DeviceScan::InclusiveSum(t, b, cub_in(x), y, uint32_t(n), c.s);
    };
    std::size_t cb = 0;
    CHECK(cub(in, out, cb, nullptr));
    const uint64_t po = kPoolBytes / sizeof(Out);  // the output pool holds fewer elements: rotate by it
    auto rot = [&](int r) { return Rotate(n, po, r); };
    const double cub_us = MedianUs([&](int r) { CHECK(cub(in + rot(r), out + rot(r), cb, c.tmp)); }, c.s);
    CHECK(cub(in, out, cb, c.tmp));
    CHECK(kernels::ClearTempStorage(c.tmp, c.tmp_bytes, c.s));  // CUB scribbled on it
    Row("copy d2d (same bytes)", n, copy_us, bytes, copy_us, copy_us, "");
    Row("cub over transform_iterator", n, cub_us, bytes, copy_us, cub_us, "(reference)");
    CHECK(cudaMemcpyAsync(ref, out, n * sizeof(Out), cudaMemcpyDeviceToDevice, c.s));
    for (const auto& variant : variants) {
      const std::string& name = variant.first;
      const auto& fn = variant.second;
      std::size_t b = 0;
      CHECK(fn(nullptr, b, in, out, n, c.s));
      if (b > c.tmp_bytes) { std::fprintf(stderr, "temp too small\n"); std::exit(1); }
      const double us = MedianUs([&](int r) { CHECK(fn(c.tmp, b, in + rot(r), out + rot(r), n, c.s)); }, c.s);
      CHECK(cudaMemsetAsync(out, 0xFF, n * sizeof(Out), c.s));
      CHECK(fn(c.tmp, b, in, out, n, c.s));
      Row(name, n, us, bytes, copy_us, cub_us,
          Verdict(Mismatches(reinterpret_cast<const Bits*>(out), reinterpret_cast<const Bits*>(ref), n, c)));
    }
  }
}

void BenchWiden(Ctx& c) {
  // Is the hardware's float16 -> float32 conversion bit for bit gpuscan::half::HalfToFloat's?
  {
    float* d = reinterpret_cast<float*>(c.out);
    HardwareHalfKernel<<<256, 256, 0, c.s>>>(d);
    CHECK(cudaGetLastError());
    std::vector<float> got(65536);
    CHECK(cudaMemcpy(got.data(), d, 65536 * 4, cudaMemcpyDeviceToHost));
    int differ = 0, nan_differ = 0, first = -1;
    for (int h = 0; h < 65536; ++h) {
      const float want = gpuscan::half::HalfToFloat(static_cast<uint16_t>(h));
      if (std::memcmp(&got[h], &want, 4) != 0) {
        ++differ;
        nan_differ += want != want;
        if (first < 0) first = h;
      }
    }
    std::printf("\nhardware cvt.f32.f16 against gpuscan::half::HalfToFloat: %d of 65536 patterns differ (%d of them NaN), "
                "first 0x%x\n", differ, nan_differ, first);
    if (first >= 0) {
      uint32_t g, w;
      const float want = gpuscan::half::HalfToFloat(static_cast<uint16_t>(first));
      std::memcpy(&g, &got[first], 4);
      std::memcpy(&w, &want, 4);
      std::printf("  0x%x: hardware 0x%08x, HalfToFloat 0x%08x\n", first, g, w);
    }
  }
  using F16 = kernels::Float16;
  using IntFn = std::function<cudaError_t(void*, std::size_t&, const int8_t*, int64_t*, uint64_t, cudaStream_t)>;
  using HalfFn = std::function<cudaError_t(void*, std::size_t&, const F16*, float*, uint64_t, cudaStream_t)>;
  const std::vector<std::pair<std::string, IntFn>> ints = {
      {"widen i8->i64 (default)",
       [](void* t, std::size_t& b, const int8_t* i, int64_t* o, uint64_t n, cudaStream_t s) {
         return kernels::ScanWidening<int8_t, int64_t, ops::Sum<int64_t>>(t, b, i, o, n, true, nullptr, nullptr, s);
       }},
      {"  128x32 d2400/1200 (int64 Large)", WidenIntScan<128, 32, 2400, 1200>},
      {"  128x16 d2400/1200 (Small)", WidenIntScan<128, 16, 2400, 1200>},
      {"  128x24 d1200/600 (Large)", WidenIntScan<128, 24, 1200, 600>},
      {"  128x24 d2400/1200", WidenIntScan<128, 24, 2400, 1200>},
      {"  128x24 d1600/800", WidenIntScan<128, 24, 1600, 800>},
      {"  128x24 d1200/300", WidenIntScan<128, 24, 1200, 300>},
      {"  128x20 d1200/600", WidenIntScan<128, 20, 1200, 600>},
      {"  128x28 d1200/600", WidenIntScan<128, 28, 1200, 600>},
      {"  96x32 d1200/600", WidenIntScan<96, 32, 1200, 600>},
  };
  BenchWidenOne<int8_t, int64_t>("widen int8 -> int64 sum (exclusive)", true, {24, 28, 29}, c, ints);
  const std::vector<std::pair<std::string, HalfFn>> halves = {
      {"widen f16->f32 (default)",
       [](void* t, std::size_t& b, const F16* i, float* o, uint64_t n, cudaStream_t s) {
         return kernels::ScanWidening<F16, float, ops::Sum<float>>(t, b, i, o, n, false, nullptr, nullptr, s);
       }},
      {"  cvt + NaN payload (default), 3 tiles", WidenHalfScan<F16, 3>},
      {"  cvt + NaN payload, 2 tiles", WidenHalfScan<F16, 2>},
      {"  hardware cvt alone, 3 tiles", WidenHalfScan<tune::HwHalf, 3>},
      {"  integer conversion (before), 3 tiles", WidenHalfScan<tune::BitHalf, 3>},
  };
  BenchWidenOne<F16, float>("widen float16 -> float32 sum (inclusive, deterministic)", false, {24, 28, 30}, c, halves);
}

// ---------------------------------------------------------------------------------------------
// Reduce.
template <class T, int kThreads, int kItems4, int kMaxBlocks, bool kStride, int kUnroll, kd::LoadHint kHint>
cudaError_t PolicyReduce(void* tmp, std::size_t& bytes, const T* in, uint64_t n, T* out, cudaStream_t s) {
  using P = kd::ReducePolicy<kThreads, kItems4 * 4 / int(sizeof(T)), kMaxBlocks, kStride, kUnroll, kHint>;
  return kd::OwnReduce<T, ops::Sum<T>, P>(tmp, bytes, in, n, nullptr, out, s);
}

template <class T>
void BenchReduce(const char* dtype, Ctx& c, bool variants) {
  Header((std::string("reduce ") + dtype + " sum").c_str());
  using kd::LoadHint;
  T* in = reinterpret_cast<T*>(c.in);
  T* out = reinterpret_cast<T*>(c.out);
  const uint64_t pe = kPoolBytes / sizeof(T);
  FillKernel<T><<<4096, 256, 0, c.s>>>(in, pe, 5 + sizeof(T));
  CHECK(cudaGetLastError());
  for (int lg = 20; lg <= 28; lg += 2) {
    const uint64_t n = 1ull << lg;
    const double bytes = double(n) * sizeof(T);
    const double copy_us = CopyUs(c, n * sizeof(T)) / 2;  // one direction's share of a copy
    std::size_t cb = 0;
    CHECK(cub::DeviceReduce::Sum(nullptr, cb, in, out, static_cast<int64_t>(n), c.s));
    const double cub_us = MedianUs([&](int r) {
      CHECK(cub::DeviceReduce::Sum(c.tmp, cb, in + Rotate(n, pe, r), out, static_cast<int64_t>(n), c.s));
    }, c.s);
    CHECK(cub::DeviceReduce::Sum(c.tmp, cb, in, out + 16, static_cast<int64_t>(n), c.s));
    CHECK(kernels::ClearTempStorage(c.tmp, c.tmp_bytes, c.s));
    T cub_ref{};
    CHECK(cudaMemcpyAsync(&cub_ref, out + 16, sizeof(T), cudaMemcpyDeviceToHost, c.s));
    CHECK(cudaStreamSynchronize(c.s));
    Row(std::string("cub::DeviceReduce::Sum ") + dtype, n, cub_us, bytes, copy_us, cub_us, "");
    auto timed = [&](const std::string& name, auto fn) {
      std::size_t b = 0;
      CHECK(fn(nullptr, b, in, n, out, c.s));
      if (b > c.tmp_bytes) { std::fprintf(stderr, "temp too small\n"); std::exit(1); }
      const double us = MedianUs([&](int r) { CHECK(fn(c.tmp, b, in + Rotate(n, pe, r), n, out, c.s)); }, c.s);
      T got[2];
      for (int k = 0; k < 2; ++k) {
        CHECK(fn(c.tmp, b, in, n, out + 32 + k, c.s));
      }
      CHECK(cudaMemcpyAsync(got, out + 32, 2 * sizeof(T), cudaMemcpyDeviceToHost, c.s));
      CHECK(cudaStreamSynchronize(c.s));
      std::string check;
      if (std::memcmp(&got[0], &got[1], sizeof(T)) != 0) check = "NONDETERMINISTIC ";
      if constexpr (std::is_floating_point_v<T>) {
        // Sums of n values in [-1, 1): the two association orders differ by far less than this.
        const double d = double(got[0]) - double(cub_ref), tol = (sizeof(T) == 4 ? 1e-5 : 1e-12) * double(n);
        check += (d <= tol && d >= -tol) ? "ok" : "MISMATCH " + std::to_string(d);
      } else {
        check += got[0] == cub_ref ? "ok" : "MISMATCH";
      }
      Row(name + " " + dtype, n, us, bytes, copy_us, cub_us, check);
    };
    timed("Reduce(own, default)", [](void* t, std::size_t& b, const T* i, uint64_t m, T* o, cudaStream_t s) {
      return kernels::Reduce<T, ops::Sum<T>>(false, t, b, i, m, nullptr, o, s);
    });
    if (variants) {
      timed("  256x16 1024 even u1 ld", PolicyReduce<T, 256, 16, 1024, false, 1, LoadHint::kDefault>);
      timed("  256x16 1024 stride u1 ld", PolicyReduce<T, 256, 16, 1024, true, 1, LoadHint::kDefault>);
      timed("  256x16 528 stride u2 nc", PolicyReduce<T, 256, 16, 528, true, 2, LoadHint::kNc>);
      timed("  256x16 1024 stride u1 cs", PolicyReduce<T, 256, 16, 1024, true, 1, LoadHint::kStream>);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Compact.
// The compaction kernel at a tile shape, with the gather buffer forced wide (8-byte words, as a
// call with indices uses) or slim (T), whatever the call asks for, and the look-back's sleeps
// given (the library chooses them per device: tuning.cuh CompactDelays).
template <class T, int kThreads, int kItems, bool kSlim>
auto PolicyCompact(int first_ns, int poll_ns) {
  return [=](void* tmp, std::size_t& bytes, const T* in, const uint8_t* flags, uint64_t n, T* out, uint64_t* count,
             cudaStream_t s) -> cudaError_t {
    using P = kd::SinglePassPolicy<kThreads, kItems, true, 0, 0>;
    const std::size_t body = kd::SinglePassBody<P>(n);
    if (tmp == nullptr) {
      bytes = kd::TempBytesFor(body);
      return cudaSuccess;
    }
    kd::TempView view;
    if (const cudaError_t e = kd::ViewTemp(tmp, bytes, body, view); e != cudaSuccess) return e;
    return kd::LaunchCompact<P, kSlim>(view, in, flags, kernels::Predicate<T>{}, n, 0, out, nullptr, count, s,
                                       kd::LookBackDelays{first_ns, poll_ns});
  };
}

template <class T>
void BenchCompact(const char* dtype, Ctx& c) {
  using W = std::conditional_t<sizeof(T) == 4, uint32_t, unsigned long long>;
  Header((std::string("compact ") + dtype + " by flags (half kept); GB/s counts size+1 bytes read + size/2 written per element").c_str());
  T* in = reinterpret_cast<T*>(c.in);
  T* out = reinterpret_cast<T*>(c.out);
  T* ref = reinterpret_cast<T*>(c.ref);
  uint8_t* flags = reinterpret_cast<uint8_t*>(c.ref) + (kPoolBytes / 2);
  const uint64_t maxn = 1ull << 28;
  FillKernel<T><<<4096, 256, 0, c.s>>>(in, maxn, 2);
  FillKernel<uint8_t><<<4096, 256, 0, c.s>>>(flags, maxn, 7);
  CHECK(cudaGetLastError());
  auto* counts = reinterpret_cast<uint64_t*>(c.d_bad) + 2;
  for (int lg : {20, 24, 28}) {
    const uint64_t n = 1ull << lg;
    const double bytes = (1.5 * sizeof(T) + 1) * double(n);
    const double copy_us = CopyUs(c, n * sizeof(T)) * bytes / (2.0 * n * sizeof(T));  // same bytes
    std::size_t sb = 0;
    CHECK(cub::DeviceSelect::Flagged(nullptr, sb, in, flags, ref, counts, static_cast<int64_t>(n), c.s));
    const double cub_us = MedianUs([&](int) {
      CHECK(cub::DeviceSelect::Flagged(c.tmp, sb, in, flags, ref, counts, static_cast<int64_t>(n), c.s));
    }, c.s);
    CHECK(kernels::ClearTempStorage(c.tmp, c.tmp_bytes, c.s));
    uint64_t want = 0;
    CHECK(cudaMemcpyAsync(&want, counts, 8, cudaMemcpyDeviceToHost, c.s));
    CHECK(cudaStreamSynchronize(c.s));
    Row(std::string("cub::DeviceSelect::Flagged ") + dtype, n, cub_us, bytes, copy_us, cub_us, "");
    auto timed = [&](const std::string& name, auto fn) {
      std::size_t b = 0;
      CHECK(fn(nullptr, b, in, flags, n, out, counts + 1, c.s));
      if (b > c.tmp_bytes) { std::fprintf(stderr, "temp too small\n"); std::exit(1); }
      const double us = MedianUs([&](int) { CHECK(fn(c.tmp, b, in, flags, n, out, counts + 1, c.s)); }, c.s);
      CHECK(cudaMemsetAsync(out, 0xFF, n * sizeof(T), c.s));
      CHECK(fn(c.tmp, b, in, flags, n, out, counts + 1, c.s));
      uint64_t got = 0;
      CHECK(cudaMemcpyAsync(&got, counts + 1, 8, cudaMemcpyDeviceToHost, c.s));
      CHECK(cudaStreamSynchronize(c.s));
      std::string check = got == want ? Verdict(Mismatches(reinterpret_cast<const W*>(out),
                                                           reinterpret_cast<const W*>(ref), want, c))
                                      : "COUNT " + std::to_string(got) + " != " + std::to_string(want);
      Row(name + " " + dtype + " flags", n, us, bytes, copy_us, cub_us, check);
    };
    timed("Compact(own, default)", [](void* t, std::size_t& b, const T* i, const uint8_t* f, uint64_t m, T* o,
                                      uint64_t* k, cudaStream_t s) {
      return kernels::Compact<T>(false, t, b, i, f, kernels::Predicate<T>{}, m, 0, o, nullptr, k, s);
    });
    // The policy before 2026-11-25, and the look-back's sleeps swept (tuning.cuh CompactDelays).
    const std::pair<int, int> delays[] = {{800, 400}, {1200, 600}, {1600, 800}, {2000, 1000}, {2400, 1200}, {3200, 1600}};
    auto name = [](const char* shape, std::pair<int, int> d) {
      return std::string("  ") + shape + " d" + std::to_string(d.first) + "/" + std::to_string(d.second);
    };
    if constexpr (sizeof(T) == 4) {
      timed("  256x16 wide gather d1200/600 (old)", PolicyCompact<T, 256, 16, false>(1200, 600));
      for (const auto d : delays) timed(name("128x64 slim", d), PolicyCompact<T, 128, 64, true>(d.first, d.second));
    } else {
      timed("  256x8 d1200/600 (old)", PolicyCompact<T, 256, 8, false>(1200, 600));
      for (const auto d : delays) timed(name("256x16", d), PolicyCompact<T, 256, 16, false>(d.first, d.second));
      timed("  128x24 d1200/600", PolicyCompact<T, 128, 24, false>(1200, 600));
      timed("  128x24 d1600/800", PolicyCompact<T, 128, 24, false>(1600, 800));
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  auto want = [&](const char* what) {
    if (argc < 2) return true;
    for (int i = 1; i < argc; ++i) {
      if (std::strcmp(argv[i], what) == 0) return true;
    }
    return false;
  };
  cudaDeviceProp prop{};
  CHECK(cudaGetDeviceProperties(&prop, 0));
  double peak_gbs = 0;
  CHECK(kd::PeakDramGBs(peak_gbs));
  std::printf("device: %s, %d SMs, L2 %d MB, peak DRAM %.0f GB/s, CUDA runtime %d; median of %d after %d warm-up\n",
              prop.name, prop.multiProcessorCount, prop.l2CacheSize >> 20, peak_gbs, CUDART_VERSION, kReps, kWarmup);
  std::printf("GB/s: bytes moved / time; %%copy = a device copy's time for the same bytes / time; "
              "xCUB = CUB time / time (>1: faster)\n");
  Ctx c;
  CHECK(cudaMalloc(&c.in, kPoolBytes));
  CHECK(cudaMalloc(&c.out, kPoolBytes));
  CHECK(cudaMalloc(&c.ref, kPoolBytes));
  CHECK(cudaMalloc(&c.tmp, c.tmp_bytes));
  CHECK(kernels::ClearTempStorage(c.tmp, c.tmp_bytes, nullptr));
  CHECK(cudaMalloc(&c.d_bad, 64));
  CHECK(cudaStreamCreateWithFlags(&c.s, cudaStreamNonBlocking));
  if (want("reduce")) {
    BenchReduce<float>("f32", c, true);
    BenchReduce<int32_t>("i32", c, true);
    BenchReduce<double>("f64", c, true);
    BenchReduce<int64_t>("i64", c, true);
  }
  if (want("compact")) {
    BenchCompact<float>("f32", c);
    BenchCompact<double>("f64", c);
  }
  if (want("scan")) {
    BenchScan<int32_t>("i32", c);
    BenchScan<float>("f32", c);
  }
  if (want("det")) {
    BenchDeterministic<float>("f32", c);
    BenchDeterministic<double>("f64", c);
  }
  if (want("scan8")) {
    BenchScan<int64_t>("i64", c);
    BenchScan<double>("f64", c);
  }
  if (want("widen")) BenchWiden(c);
  CHECK(cudaStreamSynchronize(c.s));
  std::printf("\ndone\n");
  return 0;
}
