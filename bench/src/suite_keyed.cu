// The kernel suite's keyed family: the segmented scan by keys, reduce by key and the radix sort
// of keys, each beside CUB and the copy.
#include <string>
#include <type_traits>

#include "gpuscan/kernels/reduce_by_key.h"
#include "gpuscan/kernels/segmented_scan.h"
#include "gpuscan/kernels/sort.h"

#include "suite_harness.cuh"

namespace gpuscan::bench::detail {

namespace {

// Segment keys in runs of `run` elements (the issue's cell: an average segment of 1000).
__global__ void FillRunKeys(int32_t* k, uint64_t n, uint64_t run) {
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < n; i += uint64_t(gridDim.x) * blockDim.x) {
    k[i] = int32_t(i / run);
  }
}

// A segmented inclusive sum checked step by step: out[i] == v[i] at a segment's start, else
// out[i - 1] + v[i].
__global__ void CheckSegmentedSteps(const int32_t* v, const int32_t* k, const int32_t* out, uint64_t n,
                                    unsigned long long* bad) {
  const ops::Sum<int32_t> sum;
  unsigned long long mine = 0;
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < n; i += uint64_t(gridDim.x) * blockDim.x) {
    const bool head = i == 0 || k[i] != k[i - 1];
    if (out[i] != (head ? v[i] : sum(out[i - 1], v[i]))) ++mine;
  }
  if (mine) atomicAdd(bad, mine);
}

}  // namespace

// Segmented inclusive SUM by keys, int32 values and int32 keys in runs of 1000 (the issue's
// cell), against cub::DeviceScan::InclusiveScanByKey. Ours ("fused") is what the engine runs:
// kernels::SegmentedScan, one pass forming segment heads from the keys in registers. Bytes
// moved: keys and values read, values written (12 per element).
template <class T>
bool Suite::Segmented(DType dtype, uint64_t n) {
  if constexpr (!std::is_same_v<T, int32_t>) {
    if (!segmented_noted_) Note("segmented_scan: int32 rows only (the CUB by-key peer is instantiated for int32)");
    segmented_noted_ = true;
    return true;
  } else {
    std::size_t cub_temp = 0, our_temp = 0;
    BENCH_CHECK(kernels::SegmentedScanByKeyCub(nullptr, cub_temp, nullptr, nullptr, nullptr, n, s()));
    BENCH_CHECK((kernels::SegmentedScan<int32_t, ops::Sum<int32_t>, uint32_t>(
        nullptr, our_temp, nullptr, nullptr, nullptr, n, false, nullptr, nullptr, s())));
    // in_ slots: values, then keys; ref_: CUB's output; temp_: ours, then CUB's (CUB leaves
    // its bytes dirty; ours must find its own zero).
    const std::size_t half = RoundUp(n * 4);
    if (!Prepare(What("segmented_scan", dtype, n), 2 * half, 0, half, RoundUp(our_temp) + cub_temp)) return true;
    FillPools<int32_t>(0x5E6, false);
    for (uint64_t r = 0; r < slots_; ++r) {
      FillRunKeys<<<kGrid, kBlock, 0, s()>>>(reinterpret_cast<int32_t*>(InSlot(int(r)) + half), n, 1000);
      CheckLaunch();
    }
    auto values = [&](int r) { return reinterpret_cast<const int32_t*>(InSlot(r)); };
    auto keys = [&](int r) { return reinterpret_cast<const int32_t*>(InSlot(r) + half); };
    auto out = [&](int r) { return reinterpret_cast<int32_t*>(OutSlot(r)); };
    auto* theirs = reinterpret_cast<int32_t*>(ref_.get());
    char* cub_area = temp_.get() + RoundUp(our_temp);
    auto cub = [&](int r, int32_t* y) {
      std::size_t b = cub_temp;
      return kernels::SegmentedScanByKeyCub(cub_area, b, keys(r), values(r), y, n, s());
    };
    auto mine = [&](int r, int32_t* y) {
      std::size_t b = RoundUp(our_temp);
      return kernels::SegmentedScan<int32_t, ops::Sum<int32_t>, uint32_t>(
          temp_.get(), b, values(r), reinterpret_cast<const uint32_t*>(keys(r)), y, n, false, nullptr, nullptr, s());
    };
    const uint64_t bytes = 12 * n;
    const Times copy = TimeCopy(bytes);
    const Times cub_t = Time([&](int r) { return cub(r, out(r)); });
    BENCH_CHECK(cub(0, theirs));
    BENCH_CHECK(cudaMemsetAsync(Scalar(0), 0, 8, s()));
    CheckSegmentedSteps<<<kGrid, kBlock, 0, s()>>>(values(0), keys(0), theirs, n, Scalar(0));
    CheckLaunch();
    const bool cub_ok = Fetch(0) == 0;
    if (!Emit(MakeRow("copy", "segmented_scan", dtype, n, bytes, copy, copy.median_us, cub_t.median_us, true))) {
      return false;
    }
    if (!Emit(MakeRow("segmented_scan", "cub", dtype, n, bytes, cub_t, copy.median_us, cub_t.median_us, cub_ok))) {
      return false;
    }
    if (Wants("fused")) {
      const Times t = Time([&](int r) { return mine(r, out(r)); });
      BENCH_CHECK(cudaMemsetAsync(out(0), 0xFF, n * 4, s()));
      BENCH_CHECK(mine(0, out(0)));
      const bool ok = AllSame<int32_t>(out(0), theirs, n);
      if (!Emit(MakeRow("segmented_scan", "fused", dtype, n, bytes, t, copy.median_us, cub_t.median_us, ok))) {
        return false;
      }
    }
    return true;
  }
}

// Reduce by key: SUM of int32 values over runs of 1000 equal int32 keys (the segmented cell's
// data), against cub::DeviceReduce::ReduceByKey. Ours ("fused") is kernels::ReduceByKey closing
// the last run. Bytes moved: keys and values read, one key and value written per run.
template <class T>
bool Suite::RunsByKey(DType dtype, uint64_t n) {
  if constexpr (!std::is_same_v<T, int32_t>) {
    if (!rbk_noted_) Note("reduce_by_key: int32 rows only (the CUB peer is instantiated for int32)");
    rbk_noted_ = true;
    return true;
  } else {
    std::size_t cub_temp = 0, our_temp = 0;
    BENCH_CHECK(kernels::ReduceByKeyCub(nullptr, cub_temp, nullptr, nullptr, nullptr, nullptr, nullptr, n, s()));
    BENCH_CHECK((kernels::ReduceByKey<int32_t, ops::Sum<int32_t>, uint32_t>(
        nullptr, our_temp, nullptr, nullptr, nullptr, nullptr, n, true, nullptr, nullptr, s())));
    // in_ / out_ slots: values, then keys; ref_: CUB's keys, then its values; temp_: ours, then
    // CUB's; scalars: CUB's run count at 16, our carry (the run count) at 20..23.
    const std::size_t half = RoundUp(n * 4);
    if (!Prepare(What("reduce_by_key", dtype, n), 2 * half, 0, 2 * half, RoundUp(our_temp) + cub_temp)) return true;
    FillPools<int32_t>(0x7B1, false);
    for (uint64_t r = 0; r < slots_; ++r) {
      FillRunKeys<<<kGrid, kBlock, 0, s()>>>(reinterpret_cast<int32_t*>(InSlot(int(r)) + half), n, 1000);
      CheckLaunch();
    }
    const uint64_t runs = (n + 999) / 1000;
    auto values = [&](int r) { return reinterpret_cast<const int32_t*>(InSlot(r)); };
    auto keys = [&](int r) { return reinterpret_cast<const int32_t*>(InSlot(r) + half); };
    auto out_values = [&](int r) { return reinterpret_cast<int32_t*>(OutSlot(r)); };
    auto out_keys = [&](int r) { return reinterpret_cast<int32_t*>(OutSlot(r) + half); };
    auto* their_keys = reinterpret_cast<int32_t*>(ref_.get());
    auto* their_values = reinterpret_cast<int32_t*>(ref_.get() + half);
    auto* their_runs = reinterpret_cast<int32_t*>(Scalar(16));
    auto* our_carry = reinterpret_cast<kernels::RunCarry<int32_t>*>(Scalar(20));
    char* cub_area = temp_.get() + RoundUp(our_temp);
    auto cub = [&](int r, int32_t* k, int32_t* v) {
      std::size_t b = cub_temp;
      return kernels::ReduceByKeyCub(cub_area, b, keys(r), values(r), k, v, their_runs, n, s());
    };
    auto mine = [&](int r, int32_t* k, int32_t* v) {
      std::size_t b = RoundUp(our_temp);
      return kernels::ReduceByKey<int32_t, ops::Sum<int32_t>, uint32_t>(
          temp_.get(), b, values(r), reinterpret_cast<const uint32_t*>(keys(r)), reinterpret_cast<uint32_t*>(k), v,
          n, true, nullptr, our_carry, s());
    };
    const uint64_t bytes = 8 * n + 8 * runs;
    const Times copy = TimeCopy(bytes);
    const Times cub_t = Time([&](int r) { return cub(r, out_keys(r), out_values(r)); });
    BENCH_CHECK(cub(0, their_keys, their_values));
    int32_t cub_runs = -1;
    BENCH_CHECK(cudaMemcpyAsync(&cub_runs, their_runs, 4, cudaMemcpyDeviceToHost, s()));
    BENCH_CHECK(cudaStreamSynchronize(s()));
    const bool cub_ok = uint64_t(cub_runs) == runs;
    if (!Emit(MakeRow("copy", "reduce_by_key", dtype, n, bytes, copy, copy.median_us, cub_t.median_us, true))) {
      return false;
    }
    if (!Emit(MakeRow("reduce_by_key", "cub", dtype, n, bytes, cub_t, copy.median_us, cub_t.median_us, cub_ok))) {
      return false;
    }
    if (Wants("fused")) {
      const Times t = Time([&](int r) { return mine(r, out_keys(r), out_values(r)); });
      BENCH_CHECK(cudaMemsetAsync(out_values(0), 0xFF, 2 * half, s()));
      BENCH_CHECK(mine(0, out_keys(0), out_values(0)));
      kernels::RunCarry<int32_t> carry{};
      BENCH_CHECK(cudaMemcpyAsync(&carry, our_carry, sizeof(carry), cudaMemcpyDeviceToHost, s()));
      BENCH_CHECK(cudaStreamSynchronize(s()));
      const bool ok = carry.runs == runs && cub_ok && AllSame<int32_t>(out_keys(0), their_keys, runs) &&
                      AllSame<int32_t>(out_values(0), their_values, runs);
      if (!Emit(MakeRow("reduce_by_key", "fused", dtype, n, bytes, t, copy.median_us, cub_t.median_us, ok))) {
        return false;
      }
    }
    return true;
  }
}

// Stable radix sort of unsigned keys (the issue's cells: 2^28 uint32, 2^27 uint64), keys only,
// against cub::DeviceRadixSort::SortKeys (Onesweep) on the same fresh random data each run.
// Ours ("radix") is kernels::Sort, what the engine runs. Bytes moved: the keys read and
// written once (a copy's floor; a radix sort moves them once per digit pass).
template <class T>
bool Suite::SortKeys(DType dtype, uint64_t n) {
  if constexpr (!std::is_unsigned_v<T>) {
    if (!sort_noted_) Note("sort: uint32 and uint64 rows only (the issue's cells)");
    sort_noted_ = true;
    return true;
  } else {
    std::size_t ours_temp = 0, cub_temp = 0;
    BENCH_CHECK(kernels::Sort<T>(nullptr, ours_temp, nullptr, nullptr, n, false, s()));
    BENCH_CHECK(kernels::SortKeysCub<T>(nullptr, cub_temp, nullptr, nullptr, n, s()));
    // in_ slot: the data; out_ slot: the keys to sort; ref_: CUB's alternate buffer, then CUB's
    // sorted result for the check.
    if (!Prepare(What("sort", dtype, n), n * sizeof(T), 0, 2 * RoundUp(n * sizeof(T)), std::max(ours_temp, cub_temp))) {
      return true;
    }
    FillPools<T>(0x50F7, false);
    T* alt = reinterpret_cast<T*>(ref_.get());
    T* theirs = reinterpret_cast<T*>(ref_.get() + RoundUp(n * sizeof(T)));
    auto fresh = [&](int r) {
      BENCH_CHECK(cudaMemcpyAsync(OutSlot(r), InSlot(r), n * sizeof(T), cudaMemcpyDeviceToDevice, s()));
    };
    auto keys = [&](int r) { return reinterpret_cast<T*>(OutSlot(r)); };
    auto cub = [&](int r) {
      std::size_t b = temp_.bytes();
      return kernels::SortKeysCub<T>(temp_.get(), b, keys(r), alt, n, s());
    };
    auto mine = [&](int r) {
      std::size_t b = temp_.bytes();
      return kernels::Sort<T>(temp_.get(), b, keys(r), nullptr, n, false, s());
    };
    const uint64_t bytes = 2 * n * sizeof(T);
    const Times copy = TimeCopy(bytes);
    const Times cub_t = TimeWithSetup(fresh, cub);
    fresh(0);
    BENCH_CHECK(cub(0));
    BENCH_CHECK(cudaMemcpyAsync(theirs, keys(0), n * sizeof(T), cudaMemcpyDeviceToDevice, s()));
    // CUB checked on the host: non-decreasing, and the same sum as the input (a permutation's).
    std::vector<T> host(n);
    BENCH_CHECK(cudaMemcpyAsync(host.data(), theirs, n * sizeof(T), cudaMemcpyDeviceToHost, s()));
    BENCH_CHECK(cudaMemsetAsync(Scalar(1), 0, 8, s()));
    SumAsInt64<T><<<kGrid, kBlock, 0, s()>>>(reinterpret_cast<const T*>(InSlot(0)), n, Scalar(1));
    CheckLaunch();
    const unsigned long long in_sum = Fetch(1);
    unsigned long long out_sum = 0;
    bool cub_ok = true;
    for (uint64_t i = 0; i < n; ++i) {
      out_sum += static_cast<unsigned long long>(static_cast<long long>(host[i]));
      if (i && host[i] < host[i - 1]) cub_ok = false;
    }
    cub_ok = cub_ok && out_sum == in_sum;
    if (!Emit(MakeRow("copy", "sort", dtype, n, bytes, copy, copy.median_us, cub_t.median_us, true))) return false;
    if (!Emit(MakeRow("sort", "cub", dtype, n, bytes, cub_t, copy.median_us, cub_t.median_us, cub_ok))) return false;
    if (Wants("radix")) {
      const Times t = TimeWithSetup(fresh, mine);
      fresh(0);
      BENCH_CHECK(mine(0));
      const bool ok = AllSame<T>(keys(0), theirs, n);
      if (!Emit(MakeRow("sort", "radix", dtype, n, bytes, t, copy.median_us, cub_t.median_us, ok))) return false;
    }
    return true;
  }
}

bool Suite::KeyedFamily(const std::string& op, DType dtype, uint64_t n) {
  return VisitDType(dtype, [&](auto zero) {
    using T = decltype(zero);
    if (op == "segmented_scan") return Segmented<T>(dtype, n);
    if (op == "reduce_by_key") return RunsByKey<T>(dtype, n);
    return SortKeys<T>(dtype, n);
  });
}

}  // namespace gpuscan::bench::detail
