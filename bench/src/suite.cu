// RunKernelSuite (suite.h): every scan algorithm, reduce and compact against its CUB peer and a
// device-to-device copy of the same bytes, all measured in the same run on device-resident
// random data.
//
// The harness (buffers, timing, rows) is suite_harness.cuh, its device plumbing suite_device.cuh;
// the operations are its families, a file each: suite_scan.cu (scan, scan_widen), suite_reduce.cu
// (reduce, histogram), suite_compact.cu, suite_keyed.cu (segmented_scan, reduce_by_key, sort),
// suite_matrix.cu (scan2d, scan_axis). Here: the run over the spec, and the PCIe rows.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "gpuscan/bench/suite.h"
#include "gpuscan/kernels/scan.h"
#include "suite_harness.cuh"

namespace gpuscan::bench {
namespace detail {

__global__ void FillFlags(uint8_t* p, uint64_t n, uint64_t seed) {
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < n; i += uint64_t(gridDim.x) * blockDim.x) {
    p[i] = uint8_t(Hash(i, seed) >> 63);  // half kept
  }
}

namespace {

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

}  // namespace

bool Suite::Run(const std::string& op, DType dtype, uint64_t n) {
  if (op == "scan" || op == "scan_widen") return ScanFamily(op, dtype, n);
  if (op == "reduce" || op == "histogram") return ReduceFamily(op, dtype, n);
  if (op == "segmented_scan" || op == "reduce_by_key" || op == "sort") return KeyedFamily(op, dtype, n);
  if (op == "scan2d" || op == "scan_axis") return MatrixFamily(op, dtype, n);
  if (op == "pcie") return VisitDType(dtype, [&](auto zero) { return Pcie<decltype(zero)>(dtype, n); });
  return CompactFamily(dtype, n);
}

// The PCIe link: the ceiling of calls whose arrays lie in host memory (shared-memory regions,
// registered for DMA). n elements of pinned host memory copied to the device ("h2d"), back
// ("d2h"), and both at once on two streams ("duplex": bytes_moved is one direction's, as a
// scan's input is). No kernel and no peer; verified: the bytes came back as they went.
template <class T>
bool Suite::Pcie(DType dtype, uint64_t n) {
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

}  // namespace detail

using detail::Check;
using detail::DType;
using detail::Error;
using detail::ErrorCode;
using detail::kScanAlgorithms;
using detail::ScanAlgorithm;
using detail::Suite;

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
