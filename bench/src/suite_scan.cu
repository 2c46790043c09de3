// The kernel suite's scan family: every scan algorithm and the deterministic scan ("scan"),
// and the widening scans ("scan_widen"), each beside CUB and the copy.
#include <cuda_fp16.h>
#include <thrust/iterator/transform_iterator.h>

#include <cub/device/device_scan.cuh>

#include <algorithm>
#include <string>
#include <type_traits>
#include <vector>

#include "gpuscan/kernels/canonical_scan.h"
#include "gpuscan/kernels/scan.h"
#include "gpuscan/kernels/scan_widen.h"

#include "suite_harness.cuh"

namespace gpuscan::bench::detail {

namespace {

// An inclusive sum scan checked step by step: out[i] == out[i-1] + in[i].
template <class T>
__global__ void CheckScanSteps(const T* in, const T* out, uint64_t n, unsigned long long* bad) {
  const ops::Sum<T> sum;
  unsigned long long mine = 0;
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < n; i += uint64_t(gridDim.x) * blockDim.x) {
    if (!Same(out[i], i == 0 ? in[0] : sum(out[i - 1], in[i]))) ++mine;
  }
  if (mine) atomicAdd(bad, mine);
}

// Narrow inputs for the widening scans: int8 over its full range; float16 integers -7..7 (as
// FillValues' floats: partial sums exact in float32 up to 2^30 elements, in any association).
template <class In>
__global__ void FillNarrow(In* p, uint64_t n, uint64_t seed) {
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < n; i += uint64_t(gridDim.x) * blockDim.x) {
    const uint64_t z = Hash(i, seed);
    if constexpr (std::is_same_v<In, kernels::Float16>) {
      p[i].bits = __half_as_ushort(__float2half_rn(float(int(z % 15) - 7)));
    } else {
      p[i] = static_cast<In>(z);
    }
  }
}

// A widening sum scan checked step by step, converting with kernels::Widen: inclusive
// out[i] == out[i-1] + w(in[i]) (out[0] == w(in[0])); exclusive out[i] == out[i-1] + w(in[i-1])
// (out[0] == 0).
template <class In, class Out>
__global__ void CheckWidenSteps(const In* in, const Out* out, uint64_t n, bool exclusive, unsigned long long* bad) {
  const ops::Sum<Out> sum;
  unsigned long long mine = 0;
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < n; i += uint64_t(gridDim.x) * blockDim.x) {
    Out want;
    if (exclusive) {
      want = i == 0 ? Out(0) : sum(out[i - 1], kernels::Widen<In, Out>::Convert(in[i - 1]));
    } else {
      const Out w = kernels::Widen<In, Out>::Convert(in[i]);
      want = i == 0 ? w : sum(out[i - 1], w);
    }
    if (!Same(out[i], want)) ++mine;
  }
  if (mine) atomicAdd(bad, mine);
}

// CUB's widening input: narrow -> wide as it reads (float16 by the hardware's conversion).
template <class In, class Out>
struct NarrowToWide {
  __host__ __device__ Out operator()(In x) const {
    if constexpr (std::is_same_v<In, kernels::Float16>) {
#if defined(__CUDA_ARCH__)
      return __half2float(__ushort_as_half(x.bits));
#else
      return kernels::Widen<In, Out>::Convert(x);
#endif
    } else {
      return static_cast<Out>(x);
    }
  }
};

}  // namespace

template <class T>
bool Suite::Scan(DType dtype, uint64_t n) {
  using Op = ops::Sum<T>;
  std::vector<ScanAlgorithm> algos;
  for (ScanAlgorithm a : kScanAlgorithms) {
    if (!Wants(kernels::ScanAlgorithmName(a))) continue;
    if (a == ScanAlgorithm::kChained && spec_.chained_max_elements && n > spec_.chained_max_elements) {
      if (!chained_noted_) {
        Note("scan chained: skipped above n=" + std::to_string(spec_.chained_max_elements) +
             " (it waits tile by tile: 19 ms at 2^28 int32; raise chained_max_elements / --chained-max to run it)");
        chained_noted_ = true;
      }
      continue;
    }
    algos.push_back(a);
  }
  std::size_t temp = 0;
  for (ScanAlgorithm a : {ScanAlgorithm::kCub, ScanAlgorithm::kDecoupledLookback, ScanAlgorithm::kChained,
                          ScanAlgorithm::kReduceThenScan, ScanAlgorithm::kKoggeStone, ScanAlgorithm::kBrentKung,
                          ScanAlgorithm::kBlelloch, ScanAlgorithm::kHillisSteele}) {
    std::size_t b = 0;
    BENCH_CHECK((kernels::Scan<T, Op>(a, nullptr, b, nullptr, nullptr, n, false, nullptr, nullptr, s())));
    temp = std::max(temp, b);
  }
  // The reproducible float scan (issue 11): whole tiles of 4096 only (the engine does the
  // edge tiles on the host), float SUM; its own state buffer.
  const bool deterministic = std::is_floating_point_v<T> && Wants("deterministic") && n % 4096 == 0;
  if constexpr (std::is_floating_point_v<T>) {
    if (!CanonicalNeeds<T, Op>(n, temp)) return true;
  }
  if (!Prepare(What("scan", dtype, n), n * sizeof(T), 0, n * sizeof(T), temp)) return true;
  FillPools<T>(n, false);
  const uint64_t bytes = 2 * n * sizeof(T);
  auto in = [&](int r) { return reinterpret_cast<const T*>(InSlot(r)); };
  auto out = [&](int r) { return reinterpret_cast<T*>(OutSlot(r)); };
  T* ref = reinterpret_cast<T*>(ref_.get());
  auto call = [&](ScanAlgorithm a, const T* x, T* y) {
    std::size_t b = temp_.bytes();
    return kernels::Scan<T, Op>(a, temp_.get(), b, x, y, n, false, nullptr, nullptr, s());
  };
  const Times copy = TimeCopy(bytes);
  // CUB's output is the reference; CUB itself is checked step by step.
  BENCH_CHECK(call(ScanAlgorithm::kCub, in(0), ref));
  BENCH_CHECK(cudaMemsetAsync(Scalar(0), 0, 8, s()));
  CheckScanSteps<T><<<kGrid, kBlock, 0, s()>>>(in(0), ref, n, Scalar(0));
  CheckLaunch();
  const bool cub_ok = Fetch(0) == 0;
  const Times cub = Time([&](int r) { return call(ScanAlgorithm::kCub, in(r), out(r)); });
  if (!Emit(MakeRow("copy", "scan", dtype, n, bytes, copy, copy.median_us, cub.median_us, true))) return false;
  if (!Emit(MakeRow("scan", "cub", dtype, n, bytes, cub, copy.median_us, cub.median_us, cub_ok))) return false;
  for (ScanAlgorithm a : algos) {
    const Times t = Time([&](int r) { return call(a, in(r), out(r)); });
    BENCH_CHECK(cudaMemsetAsync(out(0), 0xFF, n * sizeof(T), s()));  // poison: unwritten shows
    BENCH_CHECK(call(a, in(0), out(0)));
    const bool ok = AllSame<T>(out(0), ref, n);
    if (!Emit(MakeRow("scan", kernels::ScanAlgorithmName(a), dtype, n, bytes, t, copy.median_us, cub.median_us, ok)))
      return false;
  }
  if constexpr (std::is_floating_point_v<T>) {
    if (deterministic) {
      auto* state = reinterpret_cast<kernels::CanonicalState<T>*>(state_.get());
      auto det = [&](const T* x, T* y) {  // first tile 0: a new array, the state is not read
        std::size_t b = temp_.bytes();
        return kernels::CanonicalScan<T, Op>(temp_.get(), b, x, y, n / 4096, 0, false, state, s());
      };
      const Times t = Time([&](int r) { return det(in(r), out(r)); });
      BENCH_CHECK(cudaMemsetAsync(out(0), 0xFF, n * sizeof(T), s()));
      BENCH_CHECK(det(in(0), out(0)));
      // The suite's data sums exactly, so any association matches CUB's bits.
      const bool ok = AllSame<T>(out(0), ref, n);
      if (!Emit(MakeRow("scan", "deterministic", dtype, n, bytes, t, copy.median_us, cub.median_us, ok))) return false;
    } else if (Wants("deterministic") && n % 4096 != 0 && !deterministic_noted_) {
      Note("scan deterministic: kernel rows only for n a multiple of 4096 (whole tiles; the engine does the edges)");
      deterministic_noted_ = true;
    }
  }
  return true;
}

// Widening scans (issue 47): a narrow input scanned into a wider output in one pass
// (kernels::ScanWidening, "fused"), SUM: int8 -> int64 exclusive under --dtypes int64, float16
// -> float32 inclusive (the reproducible canonical tree) under float32; no rows for the others.
// Bytes moved: the input read and the output written once (9 and 6 per element); the copy row
// moves as many (half read, half written, as every copy row). CUB's peer:
// cub::DeviceScan::ExclusiveSum / InclusiveSum over a thrust::transform_iterator that converts
// each element as CUB reads it (float16 by the hardware's conversion). The algorithm column
// names the input and the scan: "fused[int8,excl]". CUB is checked step by step
// (CheckWidenSteps), ours against CUB's output (our data sums exactly: the same bits).
template <class T>
bool Suite::ScanWiden(DType dtype, uint64_t n) {
  if constexpr (std::is_same_v<T, int64_t>) {
    return WidenRows<int8_t, int64_t>(dtype, n, true, "int8,excl");
  } else if constexpr (std::is_same_v<T, float>) {
    return WidenRows<kernels::Float16, float>(dtype, n, false, "float16,incl");
  } else {
    if (!widen_noted_) Note("scan_widen: rows for int64 (int8 in) and float32 (float16 in) only");
    widen_noted_ = true;
    return true;
  }
}

template <class In, class Out>
bool Suite::WidenRows(DType dtype, uint64_t n, bool exclusive, const std::string& what) {
  using Op = ops::Sum<Out>;
  if (n > 0xffffffffull) {
    Note("scan_widen: n above 2^32 - 1 skipped (the CUB peer takes 32-bit counts)");
    return true;
  }
  const auto items = static_cast<uint32_t>(n);
  auto cub_in = [](const In* x) { return thrust::make_transform_iterator(x, NarrowToWide<In, Out>{}); };
  // temp_: ours, then CUB's (CUB leaves its bytes dirty; ours must find its own zero).
  std::size_t our_temp = 0, cub_temp = 0;
  BENCH_CHECK((kernels::ScanWidening<In, Out, Op>(nullptr, our_temp, nullptr, nullptr, n, exclusive, nullptr, nullptr,
                                                  s())));
  if (exclusive) {
    BENCH_CHECK(cub::DeviceScan::ExclusiveSum(nullptr, cub_temp, cub_in(nullptr), static_cast<Out*>(nullptr), items, s()));
  } else {
    BENCH_CHECK(cub::DeviceScan::InclusiveSum(nullptr, cub_temp, cub_in(nullptr), static_cast<Out*>(nullptr), items, s()));
  }
  // Slots of n wide elements serve the inputs too (and the copy's n * (in + out) / 2 bytes).
  if (!Prepare(What("scan_widen", dtype, n) + " " + what, n * sizeof(Out), 0, n * sizeof(Out),
               RoundUp(our_temp) + cub_temp)) {
    return true;
  }
  FillNarrow<In><<<kGrid, kBlock, 0, s()>>>(reinterpret_cast<In*>(in_.get()), slots_ * slot_bytes_ / sizeof(In),
                                            0x3147);
  CheckLaunch();
  auto in = [&](int r) { return reinterpret_cast<const In*>(InSlot(r)); };
  auto out = [&](int r) { return reinterpret_cast<Out*>(OutSlot(r)); };
  Out* ref = reinterpret_cast<Out*>(ref_.get());
  char* cub_area = temp_.get() + RoundUp(our_temp);
  auto cub = [&](const In* x, Out* y) {
    std::size_t b = cub_temp;
    return exclusive ? cub::DeviceScan::ExclusiveSum(cub_area, b, cub_in(x), y, items, s())
                     : cub::DeviceScan::InclusiveSum(cub_area, b, cub_in(x), y, items, s());
  };
  auto mine = [&](const In* x, Out* y) {
    std::size_t b = RoundUp(our_temp);
    return kernels::ScanWidening<In, Out, Op>(temp_.get(), b, x, y, n, exclusive, nullptr, nullptr, s());
  };
  const uint64_t bytes = n * (sizeof(In) + sizeof(Out));
  const Times copy = TimeCopy(bytes);
  const Times cub_t = Time([&](int r) { return cub(in(r), out(r)); });
  BENCH_CHECK(cub(in(0), ref));
  BENCH_CHECK(cudaMemsetAsync(Scalar(0), 0, 8, s()));
  CheckWidenSteps<In, Out><<<kGrid, kBlock, 0, s()>>>(in(0), ref, n, exclusive, Scalar(0));
  CheckLaunch();
  const bool cub_ok = Fetch(0) == 0;
  const std::string tag = "[" + what + "]";
  const std::string input = what.substr(0, what.find(','));
  if (!Emit(MakeRow("copy", "scan_widen[" + input + "]", dtype, n, bytes, copy, copy.median_us, cub_t.median_us,
                    true))) {
    return false;
  }
  if (!Emit(MakeRow("scan_widen", "cub" + tag, dtype, n, bytes, cub_t, copy.median_us, cub_t.median_us, cub_ok))) {
    return false;
  }
  if (Wants("fused")) {
    const Times t = Time([&](int r) { return mine(in(r), out(r)); });
    BENCH_CHECK(cudaMemsetAsync(out(0), 0xFF, n * sizeof(Out), s()));  // poison: unwritten shows
    BENCH_CHECK(mine(in(0), out(0)));
    const bool ok = AllSame<Out>(out(0), ref, n);
    if (!Emit(MakeRow("scan_widen", "fused" + tag, dtype, n, bytes, t, copy.median_us, cub_t.median_us, ok))) {
      return false;
    }
  }
  return true;
}

bool Suite::ScanFamily(const std::string& op, DType dtype, uint64_t n) {
  return VisitDType(dtype, [&](auto zero) {
    using T = decltype(zero);
    return op == "scan" ? Scan<T>(dtype, n) : ScanWiden<T>(dtype, n);
  });
}

}  // namespace gpuscan::bench::detail
