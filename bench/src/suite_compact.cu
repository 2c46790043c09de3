// The kernel suite's compaction rows: flagged compaction (single pass) beside CUB and the copy.
#include "gpuscan/kernels/compact.h"
#include "suite_harness.cuh"

namespace gpuscan::bench::detail {

namespace {

__global__ void CountFlags(const uint8_t* f, uint64_t n, unsigned long long* acc) {
  unsigned long long mine = 0;
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < n; i += uint64_t(gridDim.x) * blockDim.x) {
    mine += f[i] != 0;
  }
  atomicAdd(acc, mine);
}

}  // namespace

template <class T>
bool Suite::Compact(DType dtype, uint64_t n) {
  std::size_t temp = 0;
  const kernels::Predicate<T> unused{};
  for (bool use_cub : {true, false}) {
    std::size_t b = 0;
    BENCH_CHECK(kernels::Compact<T>(use_cub, nullptr, b, nullptr, nullptr, unused, n, 0, nullptr, nullptr, nullptr,
                                    s()));
    temp = std::max(temp, b);
  }
  // A slot holds the copy's share too: (n*size + n + kept*size) / 2 <= n*size + n.
  if (!Prepare(What("compact", dtype, n), n * sizeof(T) + n, n, n * sizeof(T), temp)) return true;
  FillPools<T>(n + 2, true);
  auto in = [&](int r) { return reinterpret_cast<const T*>(InSlot(r)); };
  auto out = [&](int r) { return reinterpret_cast<T*>(OutSlot(r)); };
  T* ref = reinterpret_cast<T*>(ref_.get());
  uint64_t* kept = reinterpret_cast<uint64_t*>(Scalar(2));
  auto call = [&](bool use_cub, int r, T* y) {
    std::size_t b = temp_.bytes();
    return kernels::Compact<T>(use_cub, temp_.get(), b, in(r), FlagSlot(r), unused, n, 0, y, nullptr, kept, s());
  };
  BENCH_CHECK(call(true, 0, ref));
  const uint64_t ref_kept = Fetch(2);
  BENCH_CHECK(cudaMemsetAsync(Scalar(1), 0, 8, s()));
  CountFlags<<<kGrid, kBlock, 0, s()>>>(FlagSlot(0), n, Scalar(1));
  CheckLaunch();
  const bool cub_ok = Fetch(1) == ref_kept;
  const uint64_t bytes = n * sizeof(T) + n + ref_kept * sizeof(T);
  const Times copy = TimeCopy(bytes);
  const Times cub = Time([&](int r) { return call(true, r, out(r)); });
  if (!Emit(MakeRow("copy", "compact", dtype, n, bytes, copy, copy.median_us, cub.median_us, true))) return false;
  if (!Emit(MakeRow("compact", "cub", dtype, n, bytes, cub, copy.median_us, cub.median_us, cub_ok))) return false;
  if (Wants("single_pass")) {
    const Times t = Time([&](int r) { return call(false, r, out(r)); });
    BENCH_CHECK(cudaMemsetAsync(out(0), 0xFF, n * sizeof(T), s()));
    BENCH_CHECK(cudaMemsetAsync(kept, 0xFF, 8, s()));
    BENCH_CHECK(call(false, 0, out(0)));
    const bool ok = Fetch(2) == ref_kept && AllSame<T>(out(0), ref, ref_kept);
    if (!Emit(MakeRow("compact", "single_pass", dtype, n, bytes, t, copy.median_us, cub.median_us, ok)))
      return false;
  }
  return true;
}

bool Suite::CompactFamily(DType dtype, uint64_t n) {
  return VisitDType(dtype, [&](auto zero) { return Compact<decltype(zero)>(dtype, n); });
}

}  // namespace gpuscan::bench::detail
