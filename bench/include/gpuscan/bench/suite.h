// The kernel benchmark suite as a library (no gRPC): used by the `kernel_suite` command-line
// benchmark and by the server's Benchmark RPC, which runs it on its own device with data
// generated there. Every row is measured with CUDA events after warm-up, as the median of
// `repetitions` runs, with a device-to-device copy of the same bytes and the CUB peer measured
// in the same run.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "gpuscan/types.h"

namespace gpuscan::bench {

struct SuiteSpec {
  // "scan", "reduce", "compact", "histogram" (float32 rows only); empty = all four. Also, only
  // when named: "segmented_scan", "reduce_by_key", "sort", "scan2d", "scan_axis" (axis=1 and
  // axis=0 sums of n / 256 x 256 and sqrt(n) x sqrt(n) matrices, axis=1 beside CUB's scan by
  // row-index keys), "scan_widen" (narrow inputs scanned into a wider dtype in one pass: int8 ->
  // int64 exclusive under dtype int64, float16 -> float32 inclusive under float32, beside CUB's
  // scan over a converting transform iterator), and "pcie" (pinned host memory to the device,
  // back, and both at once: the ceiling of shared-memory calls).
  std::vector<std::string> operations;
  // Names as the wire spells them: scan algorithms ("decoupled_lookback", "chained", ...,
  // "cub"), "one_pass"/"cub" for reduce, "single_pass"/"cub" for compact; empty = all.
  std::vector<std::string> algorithms;
  // Empty = int32, float32, int64, float64.
  std::vector<types::DType> dtypes;
  // Element counts; empty = every power of 4 from 2^10 to 2^30, plus 2^28.
  std::vector<uint64_t> sizes;
  int repetitions = 25;  // timed runs per row; the row reports their median
  int warmup = 3;
  int device = 0;
  // `chained` waits on its predecessor tile by tile (19 ms at 2^28 int32, 0.045x CUB): rows
  // above this many elements are skipped (and said so through on_note). 0 = no limit.
  uint64_t chained_max_elements = uint64_t(1) << 24;
  // true: a size whose buffers do not fit in free device memory is skipped (said so through
  // on_note) and the suite goes on; false: RunKernelSuite throws kResourceExhausted.
  bool skip_sizes_that_do_not_fit = true;
  // Rows the suite skipped, and why (nullable). One line each, no trailing newline.
  std::function<void(const std::string&)> on_note;
};

struct Row {
  // "scan", "reduce", "compact", "histogram", or "copy" for the reference copy. A copy row moves the same
  // bytes as the operation it is the reference of (its algorithm names that operation: "scan",
  // ...): cudaMemcpyAsync device to device of bytes_moved / 2 bytes, read + written.
  std::string operation;
  std::string algorithm;
  types::DType dtype = types::DType::kInt32;
  uint64_t elements = 0;
  double median_us = 0, min_us = 0, max_us = 0;
  // Bytes that must move: scan 2*n*size, reduce n*size, compact n*size + n + kept*size.
  uint64_t bytes_moved = 0;
  double gbps = 0;          // bytes_moved / median
  double pct_of_copy = 0;   // gbps / (device-to-device copy of the same bytes, same run) * 100
  double ratio_to_cub = 0;  // CUB's median / this median (> 1: faster than CUB); 0 if no peer
  bool verified = false;    // the result was checked against a reference on this run
  std::string device;       // the device's name
};

// Runs the suite on `spec.device`; calls on_row as each row is measured (in order: for each
// operation, dtype and size: the copy, CUB, then each algorithm). Returns false from on_row to
// stop early. Throws types::Error (kInvalidArgument for unknown names, kUnavailable without a
// device, kResourceExhausted when a size does not fit in device memory).
void RunKernelSuite(const SuiteSpec& spec, const std::function<bool(const Row&)>& on_row);

// Default sizes: every power of 4 from 2^10 to 2^30, plus 2^28 (defined in sizes.cc, so
// gpuscan_bench_report users have it without CUDA).
std::vector<uint64_t> DefaultSizes();

// The algorithm names RunKernelSuite knows for an operation ("scan", "reduce", "compact", "histogram"),
// CUB's peer ("cub") first. Empty for an unknown operation.
std::vector<std::string> SuiteAlgorithms(const std::string& operation);

struct DeviceInfo {
  std::string name;
  int driver_version = 0;   // cudaDriverGetVersion, e.g. 13000
  int runtime_version = 0;  // cudaRuntimeGetVersion (the runtime linked in)
  int compute_major = 0, compute_minor = 0;
  int sm_count = 0;
  uint64_t l2_bytes = 0;
  uint64_t memory_bytes = 0;
};

// Throws types::Error(kUnavailable) without a usable device.
DeviceInfo QueryDevice(int device);

}  // namespace gpuscan::bench
