// The kernel suite's harness (RunKernelSuite, suite.h): buffers sized per row, the timing loop
// and the rows; the operation families (suite_*.cu) are its members.
//
// How a row is timed: CUDA events around each call, `warmup` untimed calls first, then the
// median (and min, max) of `repetitions` timed calls, each synchronised on its own.
//
// L2: H100's L2 holds 50 MB, so at small n repeated calls on one buffer would time the cache.
// We rotate buffers rather than flush: inputs and outputs live in pools of at least 4x L2
// split into slots of one call's data, and call r uses slot r % slots, so between two uses of a
// slot at least 4x L2 of other inputs and outputs went through the cache. (A flush by memset
// between calls, as nvbench does, leaves up to 50 MB of dirty lines that the timed call then
// writes back; rotation adds no traffic.) From 4x L2 per slot up a single slot is used: one call
// then sweeps the cache by itself.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "gpuscan/bench/suite.h"
#include "gpuscan/kernels/canonical_scan.h"
#include "gpuscan/kernels/scan.h"
#include "gpuscan/kernels/temp_storage.h"
#include "suite_device.cuh"

namespace gpuscan::bench::detail {

using kernels::ScanAlgorithm;

inline constexpr ScanAlgorithm kScanAlgorithms[] = {
    ScanAlgorithm::kDecoupledLookback, ScanAlgorithm::kChained,   ScanAlgorithm::kReduceThenScan,
    ScanAlgorithm::kKoggeStone,        ScanAlgorithm::kBrentKung, ScanAlgorithm::kBlelloch,
    ScanAlgorithm::kHillisSteele};

class Suite {
 public:
  Suite(const SuiteSpec& spec, const std::function<bool(const Row&)>& on_row) : spec_(spec), on_row_(on_row) {
    info_ = QueryDevice(spec.device);
    BENCH_CHECK(cudaSetDevice(spec.device));
    rotate_bytes_ = std::max<std::size_t>(4 * info_.l2_bytes, std::size_t(64) << 20);
  }

  bool Run(const std::string& op, DType dtype, uint64_t n);


 private:
  bool Wants(const std::string& algorithm) const {
    return spec_.algorithms.empty() ||
           std::find(spec_.algorithms.begin(), spec_.algorithms.end(), algorithm) != spec_.algorithms.end();
  }
  void Note(const std::string& line) const {
    if (spec_.on_note) spec_.on_note(line);
  }
  cudaStream_t s() const { return stream_.get(); }

  // Sizes the buffers for one (operation, dtype, n): `slot_bytes` per call for inputs and
  // outputs each, `flag_slot` bytes of flags per call, a reference output, temp storage.
  // false when they do not fit in free device memory (and the spec says skip).
  bool Prepare(const std::string& what, std::size_t slot_bytes, std::size_t flag_slot, std::size_t ref_bytes,
               std::size_t temp_bytes) {
    slot_bytes_ = RoundUp(slot_bytes);
    flag_slot_ = RoundUp(flag_slot);
    slots_ = slot_bytes_ >= rotate_bytes_ ? 1 : (rotate_bytes_ + slot_bytes_ - 1) / slot_bytes_;
    const std::size_t pool = slots_ * slot_bytes_, flags = slots_ * flag_slot_, ref = RoundUp(ref_bytes),
                      temp = RoundUp(std::max<std::size_t>(temp_bytes, 1));
    if (in_.bytes() >= pool && out_.bytes() >= pool && flags_.bytes() >= flags && ref_.bytes() >= ref &&
        temp_.bytes() >= temp && scalars_.bytes() >= kScalarBytes) {
      return true;
    }
    for (DeviceBuffer* b : {&in_, &out_, &flags_, &ref_, &temp_, &scalars_}) b->Release();
    std::size_t free_bytes = 0, total_bytes = 0;
    BENCH_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    const std::size_t need = 2 * pool + flags + ref + temp + kScalarBytes;
    const std::size_t margin = std::size_t(256) << 20;  // the context, CUB's launches
    bool ok = need + margin <= free_bytes;
    ok = ok && in_.Allocate(pool) && out_.Allocate(pool) && flags_.Allocate(flags) && ref_.Allocate(ref) &&
         temp_.Allocate(temp) && scalars_.Allocate(kScalarBytes);
    if (!ok) {
      for (DeviceBuffer* b : {&in_, &out_, &flags_, &ref_, &temp_, &scalars_}) b->Release();
      const std::string msg = what + ": skipped, needs " + std::to_string(need >> 20) + " MiB of device memory, " +
                              std::to_string(free_bytes >> 20) + " MiB free";
      if (!spec_.skip_sizes_that_do_not_fit) throw Error(ErrorCode::kResourceExhausted, msg);
      Note(msg);
      return false;
    }
    BENCH_CHECK(kernels::ClearTempStorage(temp_.get(), temp_.bytes(), s()));
    return true;
  }

  char* InSlot(int rep) const { return in_.get() + (uint64_t(rep) % slots_) * slot_bytes_; }
  char* OutSlot(int rep) const { return out_.get() + (uint64_t(rep) % slots_) * slot_bytes_; }
  uint8_t* FlagSlot(int rep) const {
    return reinterpret_cast<uint8_t*>(flags_.get() + (uint64_t(rep) % slots_) * flag_slot_);
  }
  unsigned long long* Scalar(int i) const { return reinterpret_cast<unsigned long long*>(scalars_.get()) + i; }

  template <class T>
  void FillPools(uint64_t seed, bool with_flags) {
    FillValues<T><<<kGrid, kBlock, 0, s()>>>(reinterpret_cast<T*>(in_.get()), slots_ * slot_bytes_ / sizeof(T), seed);
    CheckLaunch();
    if (with_flags) {
      FillFlags<<<kGrid, kBlock, 0, s()>>>(FlagSlot(0), slots_ * flag_slot_, seed ^ 0x5bd1e995);
      CheckLaunch();
    }
  }

  // The deterministic (canonical-tree) kernels of n elements: their temp storage joins `temp`,
  // and their state buffer is made (shared by every float row). False: no room for the state.
  template <class T, class Op>
  bool CanonicalNeeds(uint64_t n, std::size_t& temp) {
    std::size_t b = 0;
    BENCH_CHECK((kernels::CanonicalScan<T, Op>(nullptr, b, nullptr, nullptr, n / 4096, 0, false, nullptr, s())));
    temp = std::max(temp, b);
    return state_.get() || state_.Allocate(sizeof(kernels::CanonicalState<double>));
  }

  template <class F>
  Times Time(F&& call) {
    return TimeWithSetup([](int) {}, call);
  }

  // Times call(r): `warmup` untimed runs, then the median (min, max) of `repetitions` timed ones.
  // setup(r) is enqueued before each call, outside the timed span (a sort destroys its input:
  // each run gets fresh data).
  template <class Setup, class F>
  Times TimeWithSetup(Setup&& setup, F&& call) {
    for (int i = 0; i < spec_.warmup; ++i) {
      setup(i);
      Check(call(i), "warm-up call");
    }
    const int reps = std::max(1, spec_.repetitions);
    std::vector<float> ms;
    for (int i = 0; i < reps; ++i) {
      setup(spec_.warmup + i);
      BENCH_CHECK(cudaEventRecord(start_.get(), s()));
      Check(call(spec_.warmup + i), "timed call");
      BENCH_CHECK(cudaEventRecord(stop_.get(), s()));
      BENCH_CHECK(cudaEventSynchronize(stop_.get()));
      float t = 0;
      BENCH_CHECK(cudaEventElapsedTime(&t, start_.get(), stop_.get()));
      ms.push_back(t);
    }
    std::sort(ms.begin(), ms.end());
    const std::size_t m = ms.size();
    const double median = m % 2 ? ms[m / 2] : 0.5 * (double(ms[m / 2 - 1]) + ms[m / 2]);
    return Times{1e3 * median, 1e3 * ms.front(), 1e3 * ms.back()};
  }

  // The copy that moves the same bytes: bytes_moved / 2 read and as many written.
  Times TimeCopy(uint64_t bytes_moved) {
    return Time([&](int r) {
      return cudaMemcpyAsync(OutSlot(r), InSlot(r), bytes_moved / 2, cudaMemcpyDeviceToDevice, s());
    });
  }

  unsigned long long Fetch(int i) {
    unsigned long long v = 0;
    BENCH_CHECK(cudaMemcpyAsync(&v, Scalar(i), sizeof v, cudaMemcpyDeviceToHost, s()));
    BENCH_CHECK(cudaStreamSynchronize(s()));
    return v;
  }
  template <class T>
  T FetchValue(int i) {
    T v{};
    BENCH_CHECK(cudaMemcpyAsync(&v, Scalar(i), sizeof v, cudaMemcpyDeviceToHost, s()));
    BENCH_CHECK(cudaStreamSynchronize(s()));
    return v;
  }
  template <class T>
  bool AllSame(const T* a, const T* b, uint64_t n) {
    BENCH_CHECK(cudaMemsetAsync(Scalar(0), 0, 8, s()));
    CountDifferent<T><<<kGrid, kBlock, 0, s()>>>(a, b, n, Scalar(0));
    CheckLaunch();
    return Fetch(0) == 0;
  }

  // Emits copy, CUB, then rows in `rows` order; false when on_row says stop.
  bool Emit(Row row) { return on_row_(row); }
  Row MakeRow(const std::string& op, const std::string& algorithm, DType dtype, uint64_t n, uint64_t bytes,
              const Times& t, double copy_us, double cub_us, bool verified) const {
    Row r;
    r.operation = op;
    r.algorithm = algorithm;
    r.dtype = dtype;
    r.elements = n;
    r.median_us = t.median_us;
    r.min_us = t.min_us;
    r.max_us = t.max_us;
    r.bytes_moved = bytes;
    r.gbps = t.median_us > 0 ? double(bytes) / (t.median_us * 1e3) : 0;
    r.pct_of_copy = t.median_us > 0 ? 100.0 * copy_us / t.median_us : 0;
    r.ratio_to_cub = cub_us > 0 && t.median_us > 0 ? cub_us / t.median_us : 0;
    r.verified = verified;
    r.device = info_.name;
    return r;
  }
  std::string What(const char* op, DType dtype, uint64_t n) const {
    return std::string(op) + " " + std::string(types::Name(dtype)) + " n=" + std::to_string(n);
  }

  // The operations, a family a file: the family's rows for `op` at dtype's type.
  bool ScanFamily(const std::string& op, DType dtype, uint64_t n);     // suite_scan.cu
  bool ReduceFamily(const std::string& op, DType dtype, uint64_t n);   // suite_reduce.cu
  bool CompactFamily(DType dtype, uint64_t n);                          // suite_compact.cu
  bool KeyedFamily(const std::string& op, DType dtype, uint64_t n);    // suite_keyed.cu
  bool MatrixFamily(const std::string& op, DType dtype, uint64_t n);   // suite_matrix.cu

  template <class T>
  bool Scan(DType dtype, uint64_t n);
  template <class T>
  bool ScanWiden(DType dtype, uint64_t n);
  template <class In, class Out>
  bool WidenRows(DType dtype, uint64_t n, bool exclusive, const std::string& what);
  template <class T>
  bool Reduce(DType dtype, uint64_t n);
  template <class T>
  bool Histogram(DType dtype, uint64_t n);
  template <class T>
  bool Compact(DType dtype, uint64_t n);
  template <class T>
  bool Segmented(DType dtype, uint64_t n);
  template <class T>
  bool RunsByKey(DType dtype, uint64_t n);
  template <class T>
  bool SortKeys(DType dtype, uint64_t n);
  template <class T>
  bool Scan2D(DType dtype, uint64_t n);
  template <class T>
  bool ScanAxis(DType dtype, uint64_t n);
  template <class T>
  bool Pcie(DType dtype, uint64_t n);  // suite.cu

  const SuiteSpec& spec_;
  const std::function<bool(const Row&)>& on_row_;
  DeviceInfo info_;
  std::size_t rotate_bytes_ = 0;
  Stream stream_;
  Event start_, stop_;
  DeviceBuffer in_, out_, flags_, ref_, temp_, scalars_, state_;
  std::size_t slot_bytes_ = 0, flag_slot_ = 0;
  uint64_t slots_ = 1;
  bool chained_noted_ = false;
  bool deterministic_noted_ = false;
  bool reduce_deterministic_noted_ = false;
  bool histogram_noted_ = false;
  bool segmented_noted_ = false;
  bool rbk_noted_ = false;
  bool sort_noted_ = false;
  bool widen_noted_ = false;
};

}  // namespace gpuscan::bench::detail
