// kernel_bench: times the scan algorithms against CUB and against a device-to-device copy of the
// same bytes, in one run (CUDA events, warm-up, median of 25). Inputs rotate through a 256 MiB
// pool at small sizes so that timings are of HBM, not of the 50 MB L2. Also: candidate tile
// shapes for the decoupled look-back (the figures behind detail/tuning.cuh), Reduce and Compact
// against their CUB peers. Every timed output is checked against CUB's (int32: exact).
//
// Usage: kernel_bench [--quick]
#include <cub/device/device_reduce.cuh>
#include <cub/device/device_scan.cuh>
#include <cub/device/device_select.cuh>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "detail/dispatch.cuh"
#include "gpuscan/kernels/compact.h"
#include "gpuscan/kernels/reduce.h"
#include "gpuscan/kernels/scan.h"

namespace {

using namespace gpuscan;
using kernels::ScanAlgorithm;

#define CHECK(expr)                                                                          \
  do {                                                                                       \
    const cudaError_t e_ = (expr);                                                           \
    if (e_ != cudaSuccess) {                                                                 \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #expr, cudaGetErrorString(e_)); \
      std::exit(1);                                                                          \
    }                                                                                        \
  } while (0)

constexpr int kWarmup = 3;
constexpr int kReps = 25;
constexpr uint64_t kPoolElems = 1ull << 26;  // 256 MiB of 4-byte elements per buffer

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
      // Inputs in [-1, 1): rounding differences grow at most like eps * sum |x| <= eps * (i + 1).
      const double d = double(x) - double(y), tol = 1e-3 + 4.8e-7 * double(i + 1);
      if (!(d <= tol && d >= -tol)) ++mine;
    } else {
      if (x != y) ++mine;
    }
  }
  if (mine) atomicAdd(bad, mine);
}

// Median time in microseconds of f(rep) over kReps runs after kWarmup.
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

struct Pool {
  void* in = nullptr;
  void* out = nullptr;
  void* ref = nullptr;
  uint64_t elems = 0;  // per buffer, in elements of the widest type used (4 bytes)
};

// Offset (elements) of the rep-th input so that consecutive reps touch different memory.
uint64_t Rotate(uint64_t n, uint64_t pool, int rep) {
  if (n * 2 > pool) return 0;
  const uint64_t slots = pool / n;
  return (uint64_t(rep) % slots) * n;
}

struct Row {
  std::string what;
  uint64_t n;
  double us, gbs, pct_copy, vs_cub;
  unsigned long long bad;
};

void Print(const std::vector<Row>& rows) {
  std::printf("%-34s %11s %10s %9s %8s %8s %s\n", "what", "n", "time_us", "GB/s", "%copy", "xCUB", "check");
  for (const Row& r : rows) {
    std::printf("%-34s %11llu %10.2f %9.1f %7.1f%% %8.3f %s\n", r.what.c_str(), (unsigned long long)r.n, r.us, r.gbs,
                r.pct_copy, r.vs_cub, r.bad == 0 ? "ok" : ("MISMATCH " + std::to_string(r.bad)).c_str());
  }
  std::fflush(stdout);
}

template <class T>
unsigned long long Mismatches(const T* a, const T* b, uint64_t n, unsigned long long* d_bad, cudaStream_t s) {
  CHECK(cudaMemsetAsync(d_bad, 0, 8, s));
  CountMismatchKernel<T><<<1024, 256, 0, s>>>(a, b, n, d_bad);
  CHECK(cudaGetLastError());
  unsigned long long bad = 0;
  CHECK(cudaMemcpyAsync(&bad, d_bad, 8, cudaMemcpyDeviceToHost, s));
  CHECK(cudaStreamSynchronize(s));
  return bad;
}

// A decoupled look-back scan with an explicit policy (tuning candidates): threads x items,
// striped or blocked layout, first / poll delays of the look-back in ns.
template <class T, int kThreads, int kItems, bool kStriped, int kFirst, int kPoll>
cudaError_t TunedScan(void* tmp, std::size_t& bytes, const T* in, T* out, uint64_t n, cudaStream_t s) {
  using P = kernels::detail::SinglePassPolicy<kThreads, kItems, kStriped, kFirst, kPoll>;
  return kernels::detail::SinglePassScan<T, ops::Sum<T>, P, false>(tmp, bytes, in, out, n, false, nullptr, nullptr, s);
}

template <class T>
void BenchScans(const char* dtype, const std::vector<uint64_t>& sizes, Pool& pool, void* tmp, std::size_t tmp_bytes,
                unsigned long long* d_bad, cudaStream_t s, std::vector<Row>& rows, bool tuning) {
  using Op = ops::Sum<T>;
  T* in = static_cast<T*>(pool.in);
  T* out = static_cast<T*>(pool.out);
  T* ref = static_cast<T*>(pool.ref);
  const uint64_t pe = pool.elems * 4 / sizeof(T);
  for (uint64_t n : sizes) {
    const double bytes = 2.0 * double(n) * sizeof(T);
    const double copy_us = MedianUs(
        [&](int r) { CHECK(cudaMemcpyAsync(out + Rotate(n, pe, r), in + Rotate(n, pe, r), n * sizeof(T), cudaMemcpyDeviceToDevice, s)); }, s);
    std::size_t cub_bytes = 0;
    CHECK(cub::DeviceScan::InclusiveSum(nullptr, cub_bytes, in, out, static_cast<int>(n), s));
    if (cub_bytes > tmp_bytes) { std::fprintf(stderr, "temp too small for CUB\n"); std::exit(1); }
    const double cub_us = MedianUs(
        [&](int r) { CHECK(cub::DeviceScan::InclusiveSum(tmp, cub_bytes, in + Rotate(n, pe, r), out + Rotate(n, pe, r), static_cast<int>(n), s)); }, s);
    // Reference output for the checks: CUB on the first slot.
    CHECK(cub::DeviceScan::InclusiveSum(tmp, cub_bytes, in, ref, static_cast<int>(n), s));
    CHECK(cudaMemsetAsync(tmp, 0, tmp_bytes, s));  // CUB scribbled on the shared temp buffer
    auto row = [&](const std::string& what, double us, unsigned long long bad) {
      rows.push_back({what, n, us, bytes / us / 1e3, 100.0 * copy_us / us, cub_us / us, bad});
    };
    row(std::string("copy d2d ") + dtype, copy_us, 0);
    row(std::string("cub::DeviceScan::InclusiveSum ") + dtype, cub_us, 0);
    for (ScanAlgorithm a : {ScanAlgorithm::kDecoupledLookback, ScanAlgorithm::kChained, ScanAlgorithm::kReduceThenScan,
                            ScanAlgorithm::kKoggeStone, ScanAlgorithm::kBrentKung, ScanAlgorithm::kBlelloch,
                            ScanAlgorithm::kHillisSteele, ScanAlgorithm::kCub}) {
      std::size_t b = 0;
      CHECK((kernels::Scan<T, Op>(a, nullptr, b, in, out, n, false, nullptr, nullptr, s)));
      if (b > tmp_bytes) { std::fprintf(stderr, "temp too small\n"); std::exit(1); }
      const double us = MedianUs(
          [&](int r) { CHECK((kernels::Scan<T, Op>(a, tmp, b, in + Rotate(n, pe, r), out + Rotate(n, pe, r), n, false, nullptr, nullptr, s))); }, s);
      CHECK(cudaMemsetAsync(out, 0xFF, n * sizeof(T), s));
      CHECK((kernels::Scan<T, Op>(a, tmp, b, in, out, n, false, nullptr, nullptr, s)));
      row(std::string(kernels::ScanAlgorithmName(a)) + " " + dtype, us, Mismatches(out, ref, n, d_bad, s));
    }
    if (tuning) {
      auto tuned = [&](const char* name, auto fn) {
        std::size_t b = 0;
        CHECK(fn(nullptr, b, in, out, n, s));
        const double us = MedianUs([&](int r) { CHECK(fn(tmp, b, in + Rotate(n, pe, r), out + Rotate(n, pe, r), n, s)); }, s);
        CHECK(cudaMemsetAsync(out, 0xFF, n * sizeof(T), s));
        CHECK(fn(tmp, b, in, out, n, s));
        row(std::string("  ") + name + " " + dtype, us, Mismatches(out, ref, n, d_bad, s));
      };
      if constexpr (sizeof(T) == 4) {
        tuned("striped 128x32 d1200/600", TunedScan<T, 128, 32, true, 1200, 600>);
        tuned("striped 128x32 d0/0", TunedScan<T, 128, 32, true, 0, 0>);
        tuned("striped 128x32 d2000/1000", TunedScan<T, 128, 32, true, 2000, 1000>);
        tuned("striped 256x32 d1200/600", TunedScan<T, 256, 32, true, 1200, 600>);
        tuned("striped 256x16 d1200/600", TunedScan<T, 256, 16, true, 1200, 600>);
        tuned("blocked 256x16 d1200/600", TunedScan<T, 256, 16, false, 1200, 600>);
      } else {
        tuned("striped 128x16 d1200/600", TunedScan<T, 128, 16, true, 1200, 600>);
        tuned("striped 128x12 d1200/600", TunedScan<T, 128, 12, true, 1200, 600>);
        tuned("striped 256x8 d1200/600", TunedScan<T, 256, 8, true, 1200, 600>);
        tuned("striped 256x16 d1200/600", TunedScan<T, 256, 16, true, 1200, 600>);
        tuned("striped 128x16 d0/0", TunedScan<T, 128, 16, true, 0, 0>);
      }
    }
  }
}

void BenchReduceCompact(uint64_t n, Pool& pool, void* tmp, std::size_t tmp_bytes, unsigned long long* d_bad,
                        cudaStream_t s, std::vector<Row>& rows) {
  float* in = static_cast<float*>(pool.in);
  float* out = static_cast<float*>(pool.out);
  const uint64_t pe = pool.elems;
  // Reduce f32: bytes read only.
  const double copy_us = MedianUs(
      [&](int r) { CHECK(cudaMemcpyAsync(out + Rotate(n, pe, r), in + Rotate(n, pe, r), n * 4, cudaMemcpyDeviceToDevice, s)); }, s);
  std::size_t cb = 0;
  CHECK(cub::DeviceReduce::Sum(nullptr, cb, in, out, static_cast<int>(n), s));
  const double cub_us = MedianUs([&](int r) { CHECK(cub::DeviceReduce::Sum(tmp, cb, in + Rotate(n, pe, r), out, static_cast<int>(n), s)); }, s);
  CHECK(cudaMemsetAsync(tmp, 0, tmp_bytes, s));
  rows.push_back({"cub::DeviceReduce::Sum f32", n, cub_us, 4.0 * n / cub_us / 1e3, 100.0 * copy_us / cub_us, 1.0, 0});
  for (bool use_cub : {false, true}) {
    std::size_t b = 0;
    CHECK((kernels::Reduce<float, ops::Sum<float>>(use_cub, nullptr, b, in, n, nullptr, out, s)));
    const double us = MedianUs([&](int r) { CHECK((kernels::Reduce<float, ops::Sum<float>>(use_cub, tmp, b, in + Rotate(n, pe, r), n, nullptr, out, s))); }, s);
    rows.push_back({use_cub ? "Reduce(cub) f32 sum" : "Reduce(own) f32 sum", n, us, 4.0 * n / us / 1e3, 100.0 * copy_us / us, cub_us / us, 0});
  }
  // Compact f32 by flags (half kept): reads n*5 bytes, writes about n*2.
  uint8_t* flags = reinterpret_cast<uint8_t*>(static_cast<char*>(pool.ref));
  FillKernel<uint8_t><<<1024, 256, 0, s>>>(flags, n, 7);
  CHECK(cudaGetLastError());
  unsigned long long* count = d_bad;
  std::size_t sb = 0;
  CHECK(cub::DeviceSelect::Flagged(nullptr, sb, in, flags, out, count, static_cast<int64_t>(n), s));
  const double sel_us = MedianUs([&](int) { CHECK(cub::DeviceSelect::Flagged(tmp, sb, in, flags, out, count, static_cast<int64_t>(n), s)); }, s);
  CHECK(cudaMemsetAsync(tmp, 0, tmp_bytes, s));
  rows.push_back({"cub::DeviceSelect::Flagged f32", n, sel_us, 7.0 * n / sel_us / 1e3, 100.0 * copy_us * 7 / 8 / sel_us, 1.0, 0});
  for (bool use_cub : {false, true}) {
    std::size_t b = 0;
    kernels::Predicate<float> none{};
    CHECK(kernels::Compact<float>(use_cub, nullptr, b, in, flags, none, n, 0, out, nullptr, reinterpret_cast<uint64_t*>(count), s));
    const double us = MedianUs([&](int) { CHECK(kernels::Compact<float>(use_cub, tmp, b, in, flags, none, n, 0, out, nullptr, reinterpret_cast<uint64_t*>(count), s)); }, s);
    rows.push_back({use_cub ? "Compact(cub) f32 flags" : "Compact(own) f32 flags", n, us, 7.0 * n / us / 1e3, 100.0 * copy_us * 7 / 8 / us, sel_us / us, 0});
  }
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  cudaDeviceProp prop{};
  CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s, %d SMs, L2 %d MB, CUDA runtime %d; median of %d after %d warm-up\n", prop.name,
              prop.multiProcessorCount, prop.l2CacheSize >> 20, CUDART_VERSION, kReps, kWarmup);
  std::printf("GB/s counts bytes read + written; %%copy = copy time / time; xCUB = CUB time / time (>1: faster)\n");
  const std::vector<uint64_t> sizes = quick ? std::vector<uint64_t>{1ull << 16, 1ull << 24}
                                            : std::vector<uint64_t>{1ull << 16, 1ull << 20, 1ull << 24, 1ull << 28};
  Pool pool;
  pool.elems = std::max<uint64_t>(kPoolElems, sizes.back());
  CHECK(cudaMalloc(&pool.in, pool.elems * 4));
  CHECK(cudaMalloc(&pool.out, pool.elems * 4));
  CHECK(cudaMalloc(&pool.ref, pool.elems * 4));
  const std::size_t tmp_bytes = 64ull << 20;
  void* tmp = nullptr;
  CHECK(cudaMalloc(&tmp, tmp_bytes));
  CHECK(kernels::ClearTempStorage(tmp, tmp_bytes, nullptr));
  unsigned long long* d_bad = nullptr;
  CHECK(cudaMalloc(&d_bad, 64));
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));

  std::vector<Row> rows;
  FillKernel<int32_t><<<4096, 256, 0, s>>>(static_cast<int32_t*>(pool.in), pool.elems, 1);
  CHECK(cudaGetLastError());
  BenchScans<int32_t>("i32", sizes, pool, tmp, tmp_bytes, d_bad, s, rows, true);
  Print(rows);
  rows.clear();
  FillKernel<float><<<4096, 256, 0, s>>>(static_cast<float*>(pool.in), pool.elems, 2);
  CHECK(cudaGetLastError());
  BenchScans<float>("f32", sizes, pool, tmp, tmp_bytes, d_bad, s, rows, false);
  BenchReduceCompact(sizes.back(), pool, tmp, tmp_bytes, d_bad, s, rows);
  Print(rows);
  rows.clear();
  // 8-byte tuning (the pool holds 2^27 doubles).
  FillKernel<double><<<4096, 256, 0, s>>>(static_cast<double*>(pool.in), pool.elems / 2, 3);
  CHECK(cudaGetLastError());
  BenchScans<double>("f64", quick ? std::vector<uint64_t>{1ull << 24} : std::vector<uint64_t>{1ull << 20, 1ull << 24, 1ull << 27},
                     pool, tmp, tmp_bytes, d_bad, s, rows, true);
  Print(rows);
  CHECK(cudaStreamSynchronize(s));
  return 0;
}
