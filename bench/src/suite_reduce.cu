// The kernel suite's reduction family: reduce (one pass and the deterministic tree) and the
// histogram, each beside CUB and the copy.
#include <string>
#include <type_traits>

#include "gpuscan/kernels/canonical_scan.h"
#include "gpuscan/kernels/histogram.h"
#include "gpuscan/kernels/reduce.h"

#include "suite_harness.cuh"

namespace gpuscan::bench::detail {

namespace {

// Uniform floats in [0, 1) on a 2^-24 grid: with 256 bins over [0, 1) every element's bin is
// exact in both binnings (CUB's (x - lo) * scale and the edges of hist::SlotOf), so counts agree.
__global__ void FillUnit(float* p, uint64_t n, uint64_t seed) {
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < n; i += uint64_t(gridDim.x) * blockDim.x) {
    p[i] = float(Hash(i, seed) >> 40) * (1.0f / 16777216.0f);
  }
}

}  // namespace

template <class T>
bool Suite::Reduce(DType dtype, uint64_t n) {
  using Op = ops::Sum<T>;
  std::size_t temp = 0;
  for (bool use_cub : {true, false}) {
    std::size_t b = 0;
    BENCH_CHECK((kernels::Reduce<T, Op>(use_cub, nullptr, b, nullptr, n, nullptr, nullptr, s())));
    temp = std::max(temp, b);
  }
  // The reproducible float reduction (the engine's default): the canonical tree's state after
  // whole supers of 2^20 elements holds the total as its carry.
  const bool deterministic = std::is_floating_point_v<T> && Wants("deterministic") && n % (1u << 20) == 0;
  if constexpr (std::is_floating_point_v<T>) {
    if (!CanonicalNeeds<T, Op>(n, temp)) return true;
  }
  if (!Prepare(What("reduce", dtype, n), n * sizeof(T), 0, 0, temp)) return true;
  FillPools<T>(n + 1, false);
  const uint64_t bytes = n * sizeof(T);
  auto in = [&](int r) { return reinterpret_cast<const T*>(InSlot(r)); };
  T* result = reinterpret_cast<T*>(Scalar(4));
  T* ref = reinterpret_cast<T*>(Scalar(6));
  auto call = [&](bool use_cub, const T* x, T* y) {
    std::size_t b = temp_.bytes();
    return kernels::Reduce<T, Op>(use_cub, temp_.get(), b, x, n, nullptr, y, s());
  };
  const Times copy = TimeCopy(bytes);
  BENCH_CHECK(call(true, in(0), ref));
  BENCH_CHECK(cudaMemsetAsync(Scalar(1), 0, 8, s()));
  SumAsInt64<T><<<kGrid, kBlock, 0, s()>>>(in(0), n, Scalar(1));
  CheckLaunch();
  const T ref_value = FetchValue<T>(6);
  // Integers wrap as T does; float sums of our integer-valued data are exact.
  const T exact = static_cast<T>(static_cast<long long>(Fetch(1)));
  const bool cub_ok = SameHost(ref_value, exact);
  const Times cub = Time([&](int r) { return call(true, in(r), result); });
  if (!Emit(MakeRow("copy", "reduce", dtype, n, bytes, copy, copy.median_us, cub.median_us, true))) return false;
  if (!Emit(MakeRow("reduce", "cub", dtype, n, bytes, cub, copy.median_us, cub.median_us, cub_ok))) return false;
  if (Wants("one_pass")) {
    const Times t = Time([&](int r) { return call(false, in(r), result); });
    BENCH_CHECK(cudaMemsetAsync(result, 0xFF, sizeof(T), s()));
    BENCH_CHECK(call(false, in(0), result));
    const bool ok = SameHost(FetchValue<T>(4), ref_value);
    if (!Emit(MakeRow("reduce", "one_pass", dtype, n, bytes, t, copy.median_us, cub.median_us, ok))) return false;
  }
  if constexpr (std::is_floating_point_v<T>) {
    if (deterministic) {
      auto* state = reinterpret_cast<kernels::CanonicalState<T>*>(state_.get());
      auto det = [&](const T* x) {  // no output: the state only
        std::size_t b = temp_.bytes();
        return kernels::CanonicalScan<T, Op>(temp_.get(), b, x, nullptr, n / 4096, 0, false, state, s());
      };
      const Times t = Time([&](int r) { return det(in(r)); });
      BENCH_CHECK(det(in(0)));
      T total{};
      BENCH_CHECK(cudaMemcpyAsync(&total, &state->carry, sizeof(T), cudaMemcpyDeviceToHost, s()));
      BENCH_CHECK(cudaStreamSynchronize(s()));
      const bool ok = SameHost(total, ref_value);  // the suite's data sums exactly
      if (!Emit(MakeRow("reduce", "deterministic", dtype, n, bytes, t, copy.median_us, cub.median_us, ok))) return false;
    } else if (Wants("deterministic") && !reduce_deterministic_noted_) {
      Note("reduce deterministic: kernel rows only for n a multiple of 2^20 (whole supers)");
      reduce_deterministic_noted_ = true;
    }
  }
  return true;
}

// 256 even bins over [0, 1) of float32 (the issue's cell); other dtypes have no CUB peer
// instantiated and get no rows. Bytes moved: the input, read once.
template <class T>
bool Suite::Histogram(DType dtype, uint64_t n) {
  if constexpr (!std::is_same_v<T, float>) {
    if (!histogram_noted_) Note("histogram: float32 rows only (the CUB peer is instantiated for float32)");
    histogram_noted_ = true;
    return true;
  } else {
    constexpr int kBins = 256;
    std::size_t cub_temp = 0;
    BENCH_CHECK(kernels::HistogramCubEven<float>(nullptr, cub_temp, nullptr, n, kBins, 0.f, 1.f, nullptr, s()));
    // ref_: our counters (bins + extra slots, uint64), CUB's (uint32), the edges (float64).
    const std::size_t ours_bytes = (kBins + hist::kExtraSlots) * 8, cub_bytes = kBins * 4;
    if (!Prepare(What("histogram", dtype, n), n * sizeof(T), 0, ours_bytes + cub_bytes + (kBins + 1) * 8, cub_temp)) {
      return true;
    }
    FillUnit<<<kGrid, kBlock, 0, s()>>>(reinterpret_cast<float*>(in_.get()), slots_ * slot_bytes_ / sizeof(float),
                                        n + 3);
    CheckLaunch();
    auto* ours = reinterpret_cast<unsigned long long*>(ref_.get());
    auto* theirs = reinterpret_cast<unsigned int*>(ref_.get() + ours_bytes);
    auto* d_edges = reinterpret_cast<double*>(ref_.get() + ours_bytes + cub_bytes);
    const std::vector<double> edges = hist::EvenEdges(0, 1, kBins, true);
    BENCH_CHECK(cudaMemcpyAsync(d_edges, edges.data(), edges.size() * 8, cudaMemcpyHostToDevice, s()));
    hist::Bins bins = hist::MakeBins(edges.data(), kBins, true);
    bins.edges = d_edges;
    auto in = [&](int r) { return reinterpret_cast<const float*>(InSlot(r)); };
    auto mine = [&](int r) {
      BENCH_CHECK(cudaMemsetAsync(ours, 0, ours_bytes, s()));  // a fresh histogram, as CUB's zeroes its own
      return kernels::Histogram<float>(in(r), n, bins, ours, s());
    };
    auto cub = [&](int r) {
      std::size_t b = temp_.bytes();
      return kernels::HistogramCubEven<float>(temp_.get(), b, in(r), n, kBins, 0.f, 1.f, theirs, s());
    };
    const uint64_t bytes = n * sizeof(T);
    const Times copy = TimeCopy(bytes);
    const Times cub_t = Time(cub);
    BENCH_CHECK(cub(0));
    std::vector<unsigned int> want(kBins);
    BENCH_CHECK(cudaMemcpyAsync(want.data(), theirs, cub_bytes, cudaMemcpyDeviceToHost, s()));
    BENCH_CHECK(cudaStreamSynchronize(s()));
    uint64_t total = 0;
    for (unsigned int c : want) total += c;
    const bool cub_ok = total == n;  // every element is in [0, 1)
    if (!Emit(MakeRow("copy", "histogram", dtype, n, bytes, copy, copy.median_us, cub_t.median_us, true))) return false;
    if (!Emit(MakeRow("histogram", "cub", dtype, n, bytes, cub_t, copy.median_us, cub_t.median_us, cub_ok))) {
      return false;
    }
    if (Wants("shared_atomics")) {
      const Times t = Time(mine);
      BENCH_CHECK(mine(0));
      std::vector<unsigned long long> got(kBins + hist::kExtraSlots);
      BENCH_CHECK(cudaMemcpyAsync(got.data(), ours, ours_bytes, cudaMemcpyDeviceToHost, s()));
      BENCH_CHECK(cudaStreamSynchronize(s()));
      bool ok = got[kBins + hist::kBelow] == 0 && got[kBins + hist::kAbove] == 0 && got[kBins + hist::kNan] == 0;
      for (int i = 0; i < kBins; ++i) ok = ok && got[i] == want[i];
      if (!Emit(MakeRow("histogram", "shared_atomics", dtype, n, bytes, t, copy.median_us, cub_t.median_us, ok))) {
        return false;
      }
    }
    return true;
  }
}

bool Suite::ReduceFamily(const std::string& op, DType dtype, uint64_t n) {
  return VisitDType(dtype, [&](auto zero) {
    using T = decltype(zero);
    return op == "reduce" ? Reduce<T>(dtype, n) : Histogram<T>(dtype, n);
  });
}

}  // namespace gpuscan::bench::detail
