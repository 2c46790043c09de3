// RunKernelSuite (suite.h): every scan algorithm, reduce and compact against its CUB peer and a
// device-to-device copy of the same bytes, all measured in the same run on device-resident
// random data.
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
//
// Data: integers drawn from a hash of the index, also for float32/float64 (-7..7, mean 0), so
// every partial sum stays far below 2^24 up to n = 2^30 and float sums are exact in any
// association order: results can be compared exactly against CUB (a tolerance of 1e-6 relative
// is allowed for floats all the same). CUB itself is checked independently: its scan by
// out[i] == out[i-1] + in[i] on the device, its reduce against an int64 sum, its compaction's
// count against the number of set flags.
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>

#include <cub/device/device_scan.cuh>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "gpuscan/bench/suite.h"
#include "gpuscan/kernels/canonical_scan.h"
#include "gpuscan/kernels/compact.h"
#include "gpuscan/kernels/histogram.h"
#include "gpuscan/kernels/reduce.h"
#include "gpuscan/kernels/scan.h"
#include "gpuscan/kernels/scan2d.h"
#include "gpuscan/kernels/scan_axis.h"
#include "gpuscan/kernels/scan_widen.h"
#include "gpuscan/kernels/reduce_by_key.h"
#include "gpuscan/kernels/segmented_scan.h"
#include "gpuscan/kernels/sort.h"
#include "gpuscan/kernels/temp_storage.h"

namespace gpuscan::bench {
namespace {

using types::DType;
using types::Error;
using types::ErrorCode;
using kernels::ScanAlgorithm;

void Check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  cudaGetLastError();  // clear a non-sticky error before throwing
  throw Error(e == cudaErrorMemoryAllocation ? ErrorCode::kResourceExhausted : ErrorCode::kInternal,
              std::string(what) + ": " + cudaGetErrorString(e));
}
#define BENCH_CHECK(expr) Check((expr), #expr)

constexpr std::size_t kAlign = 256;
std::size_t RoundUp(std::size_t x) { return (x + kAlign - 1) / kAlign * kAlign; }

// One cudaMalloc'd buffer.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { Release(); }
  void Release() {
    if (ptr_) cudaFree(ptr_);
    ptr_ = nullptr;
    bytes_ = 0;
  }
  // false (error cleared) when the device has not that much memory free.
  bool Allocate(std::size_t bytes) {
    Release();
    if (bytes == 0) return true;
    const cudaError_t e = cudaMalloc(&ptr_, bytes);
    if (e == cudaErrorMemoryAllocation) {
      cudaGetLastError();
      ptr_ = nullptr;
      return false;
    }
    Check(e, "cudaMalloc");
    bytes_ = bytes;
    return true;
  }
  char* get() const { return static_cast<char*>(ptr_); }
  std::size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
};

class Stream {
 public:
  Stream() { BENCH_CHECK(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking)); }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  ~Stream() { cudaStreamDestroy(s_); }
  cudaStream_t get() const { return s_; }

 private:
  cudaStream_t s_ = nullptr;
};

// Page-locked host memory (cudaMallocHost), for the PCIe rows.
class PinnedHost {
 public:
  explicit PinnedHost(std::size_t bytes) { BENCH_CHECK(cudaMallocHost(&p_, std::max<std::size_t>(bytes, 1))); }
  PinnedHost(const PinnedHost&) = delete;
  PinnedHost& operator=(const PinnedHost&) = delete;
  ~PinnedHost() { cudaFreeHost(p_); }
  char* get() const { return static_cast<char*>(p_); }

 private:
  void* p_ = nullptr;
};

class Event {
 public:
  Event() { BENCH_CHECK(cudaEventCreate(&e_)); }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  ~Event() { cudaEventDestroy(e_); }
  cudaEvent_t get() const { return e_; }

 private:
  cudaEvent_t e_ = nullptr;
};

// ---- device-side data and checks ---------------------------------------------------------

constexpr int kGrid = 2048, kBlock = 256;

__device__ __forceinline__ uint64_t Hash(uint64_t i, uint64_t seed) {
  uint64_t z = (i + seed) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

template <class T>
__global__ void FillValues(T* p, uint64_t n, uint64_t seed) {
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < n; i += uint64_t(gridDim.x) * blockDim.x) {
    const uint64_t z = Hash(i, seed);
    if constexpr (std::is_floating_point_v<T>) {
      p[i] = T(int(z % 15) - 7);
    } else if constexpr (std::is_signed_v<T>) {
      p[i] = T(int(z % 1000) - 500);
    } else {
      p[i] = T(z % 1000);
    }
  }
}

// Uniform floats in [0, 1) on a 2^-24 grid: with 256 bins over [0, 1) every element's bin is
// exact in both binnings (CUB's (x - lo) * scale and the edges of hist::SlotOf), so counts agree.
__global__ void FillUnit(float* p, uint64_t n, uint64_t seed) {
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < n; i += uint64_t(gridDim.x) * blockDim.x) {
    p[i] = float(Hash(i, seed) >> 40) * (1.0f / 16777216.0f);
  }
}

__global__ void FillFlags(uint8_t* p, uint64_t n, uint64_t seed) {
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < n; i += uint64_t(gridDim.x) * blockDim.x) {
    p[i] = uint8_t(Hash(i, seed) >> 63);  // half kept
  }
}

template <class T>
__device__ __forceinline__ bool Same(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    const double d = double(a) - double(b), tol = 1e-6 * fabs(double(b));
    return d <= tol && d >= -tol;  // false for NaN
  } else {
    return a == b;
  }
}

template <class T>
__global__ void CountDifferent(const T* a, const T* b, uint64_t n, unsigned long long* bad) {
  unsigned long long mine = 0;
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < n; i += uint64_t(gridDim.x) * blockDim.x) {
    if (!Same(a[i], b[i])) ++mine;
  }
  if (mine) atomicAdd(bad, mine);
}

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

// Sum of integer-valued elements in wrapping 64-bit arithmetic (exact for our data).
template <class T>
__global__ void SumAsInt64(const T* in, uint64_t n, unsigned long long* acc) {
  unsigned long long mine = 0;
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < n; i += uint64_t(gridDim.x) * blockDim.x) {
    mine += static_cast<unsigned long long>(static_cast<long long>(in[i]));
  }
  atomicAdd(acc, mine);
}

__global__ void CountFlags(const uint8_t* f, uint64_t n, unsigned long long* acc) {
  unsigned long long mine = 0;
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < n; i += uint64_t(gridDim.x) * blockDim.x) {
    mine += f[i] != 0;
  }
  atomicAdd(acc, mine);
}

// The 2-D scan's reference: each row folded left to right by one thread, then each column top
// to bottom by one thread. Slow, but the association gpuscan.v1.Scan2DHeader fixes: bit for bit.
template <class T>
__global__ void RowFolds(const T* in, T* out, uint64_t rows, uint64_t cols) {
  const uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x;
  if (i >= rows) return;
  const ops::Sum<T> sum;
  T acc = in[i * cols];
  out[i * cols] = acc;
  for (uint64_t j = 1; j < cols; ++j) out[i * cols + j] = acc = sum(acc, in[i * cols + j]);
}
template <class T>
__global__ void ColumnFolds(T* out, uint64_t rows, uint64_t cols) {
  const uint64_t j = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x;
  if (j >= cols) return;
  const ops::Sum<T> sum;
  for (uint64_t i = 1; i < rows; ++i) out[i * cols + j] = sum(out[(i - 1) * cols + j], out[i * cols + j]);
}

// The row index of element i of a matrix of `cols` columns: the keys of CUB's scan by key as an
// axis=1 scan (a transform of a counting iterator: no key bytes move).
struct RowOf {
  uint32_t cols;
  __host__ __device__ uint32_t operator()(uint32_t i) const { return i / cols; }
};

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

void CheckLaunch() { BENCH_CHECK(cudaGetLastError()); }

// The one place a DType becomes a template argument.
template <class F>
void VisitDType(DType t, F&& f) {
  switch (t) {
    case DType::kInt32: return f(int32_t{});
    case DType::kInt64: return f(int64_t{});
    case DType::kUInt32: return f(uint32_t{});
    case DType::kUInt64: return f(uint64_t{});
    case DType::kFloat32: return f(float{});
    case DType::kFloat64: return f(double{});
  }
  throw Error(ErrorCode::kInvalidArgument, "unknown dtype");
}

template <class T>
bool SameHost(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    return std::fabs(double(a) - double(b)) <= 1e-6 * std::fabs(double(b));
  } else {
    return a == b;
  }
}

constexpr ScanAlgorithm kScanAlgorithms[] = {
    ScanAlgorithm::kDecoupledLookback, ScanAlgorithm::kChained,   ScanAlgorithm::kReduceThenScan,
    ScanAlgorithm::kKoggeStone,        ScanAlgorithm::kBrentKung, ScanAlgorithm::kBlelloch,
    ScanAlgorithm::kHillisSteele};

struct Times {
  double median_us = 0, min_us = 0, max_us = 0;
};

// Scalars on the device: [0] mismatch count, [1] int64 sum / flag count, [2] kept count,
// [4..5] a reduce's output, [6..7] the reference reduce's output.
constexpr std::size_t kScalarBytes = 256;

// ---- the suite -----------------------------------------------------------------------------

class Suite {
 public:
  Suite(const SuiteSpec& spec, const std::function<bool(const Row&)>& on_row) : spec_(spec), on_row_(on_row) {
    info_ = QueryDevice(spec.device);
    BENCH_CHECK(cudaSetDevice(spec.device));
    rotate_bytes_ = std::max<std::size_t>(4 * info_.l2_bytes, std::size_t(64) << 20);
  }

  // false: on_row asked to stop.
  bool Run(const std::string& op, DType dtype, uint64_t n) {
    bool go_on = true;
    VisitDType(dtype, [&](auto zero) {
      using T = decltype(zero);
      if (op == "scan") go_on = Scan<T>(dtype, n);
      else if (op == "reduce") go_on = Reduce<T>(dtype, n);
      else if (op == "histogram") go_on = Histogram<T>(dtype, n);
      else if (op == "segmented_scan") go_on = Segmented<T>(dtype, n);
      else if (op == "reduce_by_key") go_on = RunsByKey<T>(dtype, n);
      else if (op == "sort") go_on = SortKeys<T>(dtype, n);
      else if (op == "scan2d") go_on = Scan2D<T>(dtype, n);
      else if (op == "scan_axis") go_on = ScanAxis<T>(dtype, n);
      else if (op == "scan_widen") go_on = ScanWiden<T>(dtype, n);
      else if (op == "pcie") go_on = Pcie<T>(dtype, n);
      else go_on = Compact<T>(dtype, n);
    });
    return go_on;
  }

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

  template <class T>
  bool Scan(DType dtype, uint64_t n) {
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

  template <class T>
  bool Reduce(DType dtype, uint64_t n) {
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

  template <class T>
  bool Compact(DType dtype, uint64_t n) {
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

  // 256 even bins over [0, 1) of float32 (the issue's cell); other dtypes have no CUB peer
  // instantiated and get no rows. Bytes moved: the input, read once.
  template <class T>
  bool Histogram(DType dtype, uint64_t n) {
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

  // Segmented inclusive SUM by keys, int32 values and int32 keys in runs of 1000 (the issue's
  // cell), against cub::DeviceScan::InclusiveScanByKey. Ours ("fused") is what the engine runs:
  // kernels::SegmentedScan, one pass forming segment heads from the keys in registers. Bytes
  // moved: keys and values read, values written (12 per element).
  template <class T>
  bool Segmented(DType dtype, uint64_t n) {
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
  bool RunsByKey(DType dtype, uint64_t n) {
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
  bool SortKeys(DType dtype, uint64_t n) {
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

  // 2-D inclusive sum (summed-area table) of a square matrix of about n elements: cols =
  // floor(sqrt(n)), rows = n / cols (the issue's cell: 2^28 = 16384 x 16384 float32). No CUB
  // peer exists; the bar is the device copy of the same bytes (the matrix read and written
  // once). Checked against RowFolds + ColumnFolds.
  template <class T>
  bool Scan2D(DType dtype, uint64_t n) {
    using Op = ops::Sum<T>;
    const uint64_t cols = std::max<uint64_t>(1, uint64_t(std::sqrt(double(n)))), rows = n / cols, m = rows * cols;
    std::size_t temp = 0;
    BENCH_CHECK((kernels::Scan2D<T, Op>(nullptr, temp, nullptr, nullptr, rows, cols, nullptr, s())));
    if (!Prepare(What("scan2d", dtype, m), m * sizeof(T), 0, m * sizeof(T), temp)) return true;
    FillPools<T>(0x5A7, false);
    auto in = [&](int r) { return reinterpret_cast<const T*>(InSlot(r)); };
    auto out = [&](int r) { return reinterpret_cast<T*>(OutSlot(r)); };
    auto mine = [&](int r) {
      std::size_t b = temp_.bytes();
      return kernels::Scan2D<T, Op>(temp_.get(), b, in(r), out(r), rows, cols, nullptr, s());
    };
    const uint64_t bytes = 2 * m * sizeof(T);
    const Times copy = TimeCopy(bytes);
    if (!Emit(MakeRow("copy", "scan2d", dtype, m, bytes, copy, copy.median_us, 0, true))) return false;
    if (Wants("tile_wavefront")) {
      const Times t = Time(mine);
      BENCH_CHECK(mine(0));
      T* ref = reinterpret_cast<T*>(ref_.get());
      RowFolds<T><<<unsigned((rows + 255) / 256), 256, 0, s()>>>(in(0), ref, rows, cols);
      CheckLaunch();
      ColumnFolds<T><<<unsigned((cols + 255) / 256), 256, 0, s()>>>(ref, rows, cols);
      CheckLaunch();
      const bool ok = AllSame<T>(out(0), ref, m);
      if (!Emit(MakeRow("scan2d", "tile_wavefront", dtype, m, bytes, t, copy.median_us, 0, ok))) return false;
    }
    return true;
  }

  // Axis scans (issue 47), inclusive sums of n elements as two shapes: tall (n / 256 rows x 256
  // columns, the issue's 2^20 x 256 at n = 2^28) and square (floor(sqrt(n)) columns: 2^14 x
  // 2^14). Each shape gets its own copy row (the matrix read and written once), then "axis1"
  // (ScanRows: numpy's cumsum(m, axis=1)) beside CUB's best formulation of it, "cub_by_key"
  // (cub::DeviceScan::InclusiveScanByKey with row-index keys made by a transform of a counting
  // iterator: no key bytes move; its ratio_to_cub is 1, axis1's is against it), and "axis0"
  // (ScanColumns, no carry; no CUB peer). The algorithm column names the shape:
  // "axis1[1048576x256]". Checked against RowFolds (axis1, cub_by_key) and ColumnFolds of a copy
  // of the input (axis0), bit for bit up to the rows' 1e-6 float tolerance (our data's sums are
  // exact integers).
  template <class T>
  bool ScanAxis(DType dtype, uint64_t n) {
    using Op = ops::Sum<T>;
    const uint64_t square = std::max<uint64_t>(1, uint64_t(std::sqrt(double(n))));
    for (const uint64_t cols : {std::min<uint64_t>(256, n), square}) {
      const uint64_t rows = n / cols, m = rows * cols;
      const std::string shape = "[" + std::to_string(rows) + "x" + std::to_string(cols) + "]";
      auto keys = thrust::make_transform_iterator(thrust::counting_iterator<uint32_t>(0), RowOf{uint32_t(cols)});
      std::size_t temp = 0, b = 0;
      BENCH_CHECK((kernels::ScanRows<T, Op>(nullptr, b, nullptr, nullptr, rows, cols, false, s())));
      temp = std::max(temp, b);
      BENCH_CHECK((kernels::ScanColumns<T, Op>(nullptr, b, nullptr, nullptr, rows, cols, false, nullptr, nullptr, s())));
      temp = std::max(temp, b);
      const std::size_t axis0_temp = b;
      BENCH_CHECK(cub::DeviceScan::InclusiveScanByKey(nullptr, b, keys, static_cast<const T*>(nullptr),
                                                      static_cast<T*>(nullptr), ::cuda::std::plus<>{}, uint32_t(m),
                                                      ::cuda::std::equal_to<>{}, s()));
      temp = std::max(temp, b);
      if (!Prepare(What("scan_axis", dtype, m) + " " + shape, m * sizeof(T), 0, m * sizeof(T), temp)) continue;
      Note("scan_axis " + std::string(types::Name(dtype)) + " " + shape + ": axis0 temp " +
           std::to_string(axis0_temp) + " bytes");
      FillPools<T>(0xA715, false);
      auto in = [&](int r) { return reinterpret_cast<const T*>(InSlot(r)); };
      auto out = [&](int r) { return reinterpret_cast<T*>(OutSlot(r)); };
      T* ref = reinterpret_cast<T*>(ref_.get());
      const uint64_t bytes = 2 * m * sizeof(T);
      const Times copy = TimeCopy(bytes);
      auto cub_call = [&](int r) {
        std::size_t tb = temp_.bytes();
        return cub::DeviceScan::InclusiveScanByKey(temp_.get(), tb, keys, in(r), out(r), ::cuda::std::plus<>{}, uint32_t(m),
                                                   ::cuda::std::equal_to<>{}, s());
      };
      const Times cub_t = Time(cub_call);
      RowFolds<T><<<unsigned((rows + 255) / 256), 256, 0, s()>>>(in(0), ref, rows, cols);
      CheckLaunch();
      BENCH_CHECK(cub_call(0));
      const bool cub_ok = AllSame<T>(out(0), ref, m);
      if (!Emit(MakeRow("copy", "scan_axis" + shape, dtype, m, bytes, copy, copy.median_us, cub_t.median_us, true))) {
        return false;
      }
      if (!Emit(MakeRow("scan_axis", "cub_by_key" + shape, dtype, m, bytes, cub_t, copy.median_us, cub_t.median_us,
                        cub_ok))) {
        return false;
      }
      if (Wants("axis1")) {
        auto mine = [&](int r) {
          std::size_t tb = temp_.bytes();
          return kernels::ScanRows<T, Op>(temp_.get(), tb, in(r), out(r), rows, cols, false, s());
        };
        const Times t = Time(mine);
        BENCH_CHECK(mine(0));
        const bool ok = AllSame<T>(out(0), ref, m);
        if (!Emit(MakeRow("scan_axis", "axis1" + shape, dtype, m, bytes, t, copy.median_us, cub_t.median_us, ok))) {
          return false;
        }
      }
      if (Wants("axis0")) {
        auto mine = [&](int r) {
          std::size_t tb = temp_.bytes();
          return kernels::ScanColumns<T, Op>(temp_.get(), tb, in(r), out(r), rows, cols, false, nullptr, nullptr, s());
        };
        const Times t = Time(mine);
        BENCH_CHECK(mine(0));
        BENCH_CHECK(cudaMemcpyAsync(ref, in(0), m * sizeof(T), cudaMemcpyDeviceToDevice, s()));
        ColumnFolds<T><<<unsigned((cols + 255) / 256), 256, 0, s()>>>(ref, rows, cols);
        CheckLaunch();
        const bool ok = AllSame<T>(out(0), ref, m);
        if (!Emit(MakeRow("scan_axis", "axis0" + shape, dtype, m, bytes, t, copy.median_us, 0, ok))) return false;
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
  bool ScanWiden(DType dtype, uint64_t n) {
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
  bool WidenRows(DType dtype, uint64_t n, bool exclusive, const std::string& what) {
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

  // The PCIe link: the ceiling of calls whose arrays lie in host memory (shared-memory regions,
  // registered for DMA). n elements of pinned host memory copied to the device ("h2d"), back
  // ("d2h"), and both at once on two streams ("duplex": bytes_moved is one direction's, as a
  // scan's input is). No kernel and no peer; verified: the bytes came back as they went.
  template <class T>
  bool Pcie(DType dtype, uint64_t n) {
    const std::size_t bytes = n * sizeof(T);
    if (!Prepare(What("pcie", dtype, n), bytes, 0, 0, 0)) return true;
    PinnedHost sent(bytes), back(bytes);
    for (std::size_t i = 0; i + 8 <= bytes; i += 8) {
      const uint64_t word = i * 0x9E3779B97F4A7C15ull + 7;
      std::memcpy(sent.get() + i, &word, 8);
    }
    const Times h2d = Time([&](int r) {
      return cudaMemcpyAsync(InSlot(r), sent.get(), bytes, cudaMemcpyHostToDevice, s());
    });
    const Times d2h = Time([&](int r) {
      return cudaMemcpyAsync(back.get(), InSlot(r), bytes, cudaMemcpyDeviceToHost, s());
    });
    BENCH_CHECK(cudaStreamSynchronize(s()));
    const bool ok = std::memcmp(sent.get(), back.get(), bytes) == 0;
    Stream other;
    Event forked, joined;
    const Times duplex = Time([&](int r) {
      BENCH_CHECK(cudaEventRecord(forked.get(), s()));
      BENCH_CHECK(cudaStreamWaitEvent(other.get(), forked.get(), 0));
      BENCH_CHECK(cudaMemcpyAsync(back.get(), OutSlot(r), bytes, cudaMemcpyDeviceToHost, other.get()));
      BENCH_CHECK(cudaEventRecord(joined.get(), other.get()));
      const cudaError_t e = cudaMemcpyAsync(InSlot(r), sent.get(), bytes, cudaMemcpyHostToDevice, s());
      BENCH_CHECK(cudaStreamWaitEvent(s(), joined.get(), 0));
      return e;
    });
    return Emit(MakeRow("pcie", "h2d", dtype, n, bytes, h2d, 0, 0, ok)) &&
           Emit(MakeRow("pcie", "d2h", dtype, n, bytes, d2h, 0, 0, ok)) &&
           Emit(MakeRow("pcie", "duplex", dtype, n, bytes, duplex, 0, 0, ok));
  }

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

}  // namespace

std::vector<std::string> SuiteAlgorithms(const std::string& operation) {
  if (operation == "scan") {
    std::vector<std::string> names{"cub"};
    for (ScanAlgorithm a : kScanAlgorithms) names.push_back(kernels::ScanAlgorithmName(a));
    names.push_back("deterministic");  // float dtypes only
    return names;
  }
  if (operation == "reduce") return {"cub", "one_pass"};
  if (operation == "compact") return {"cub", "single_pass"};
  if (operation == "histogram") return {"cub", "shared_atomics"};
  if (operation == "segmented_scan") return {"cub", "fused"};  // asked for by name, not in "all"
  if (operation == "reduce_by_key") return {"cub", "fused"};   // likewise
  if (operation == "sort") return {"cub", "radix"};             // likewise
  if (operation == "scan2d") return {"tile_wavefront"};         // likewise (no CUB peer)
  if (operation == "scan_axis") return {"axis1", "axis0", "cub_by_key"};  // likewise
  if (operation == "scan_widen") return {"cub", "fused"};       // likewise
  if (operation == "pcie") return {"h2d", "d2h", "duplex"};     // likewise (copies only)
  return {};
}

DeviceInfo QueryDevice(int device) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    cudaGetLastError();
    throw Error(ErrorCode::kUnavailable, "no CUDA device");
  }
  if (device < 0 || device >= count) {
    throw Error(ErrorCode::kUnavailable, "no CUDA device " + std::to_string(device) + " (" + std::to_string(count) +
                                             " present)");
  }
  cudaDeviceProp prop{};
  BENCH_CHECK(cudaGetDeviceProperties(&prop, device));
  DeviceInfo info;
  info.name = prop.name;
  BENCH_CHECK(cudaDriverGetVersion(&info.driver_version));
  BENCH_CHECK(cudaRuntimeGetVersion(&info.runtime_version));
  info.compute_major = prop.major;
  info.compute_minor = prop.minor;
  info.sm_count = prop.multiProcessorCount;
  info.l2_bytes = uint64_t(prop.l2CacheSize);
  info.memory_bytes = uint64_t(prop.totalGlobalMem);
  return info;
}

void RunKernelSuite(const SuiteSpec& spec, const std::function<bool(const Row&)>& on_row) {
  const std::vector<std::string> all_ops{"scan", "reduce", "compact", "histogram"};
  const std::vector<std::string> ops = spec.operations.empty() ? all_ops : spec.operations;
  for (const std::string& op : ops) {
    if (SuiteAlgorithms(op).empty()) {
      throw Error(ErrorCode::kInvalidArgument,
                  "unknown operation '" + op +
                                 "' (scan, reduce, compact, histogram, segmented_scan, reduce_by_key, sort, scan2d, scan_axis, scan_widen, pcie)");
    }
  }
  for (const std::string& a : spec.algorithms) {
    bool known = false;
    for (const std::string& op : ops) {
      const auto names = SuiteAlgorithms(op);
      known = known || std::find(names.begin(), names.end(), a) != names.end();
    }
    if (!known) throw Error(ErrorCode::kInvalidArgument, "unknown algorithm '" + a + "' for the chosen operations");
  }
  const std::vector<DType> dtypes = spec.dtypes.empty()
                                        ? std::vector<DType>{DType::kInt32, DType::kFloat32, DType::kInt64,
                                                             DType::kFloat64}
                                        : spec.dtypes;
  const std::vector<uint64_t> sizes = spec.sizes.empty() ? DefaultSizes() : spec.sizes;
  for (uint64_t n : sizes) {
    if (n == 0) throw Error(ErrorCode::kInvalidArgument, "size 0 in the suite's sizes");
  }
  // The device first: the suite's stream and events belong to the device current when they are
  // made (a stream of device 0 with buffers of device 1 fails every call).
  QueryDevice(spec.device);
  BENCH_CHECK(cudaSetDevice(spec.device));
  Suite suite(spec, on_row);
  for (const std::string& op : ops) {
    for (DType dtype : dtypes) {
      for (uint64_t n : sizes) {
        if (!suite.Run(op, dtype, n)) return;
      }
    }
  }
}

}  // namespace gpuscan::bench
