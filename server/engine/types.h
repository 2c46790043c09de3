// The engine's specs: what each session is asked to do, in the shared vocabulary (gpuscan/types.h,
// whose words the engine uses as its own). Plain C++ (no protobuf, no CUDA): the server
// translates the wire API into these.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gpuscan/types.h"

namespace gpuscan::engine {

using types::DType;
using types::Error;
using types::ErrorCode;
using types::IsBitwise;
using types::IsFloat;
using types::IsSigned;
using types::kAllDTypes;
using types::kAllOps;
using types::Name;
using types::Op;
using types::PredicateOp;
using types::ScanAlgorithm;
using types::SizeOf;

struct ScanSpec {
  DType dtype = DType::kInt32;
  Op op = Op::kSum;
  bool exclusive = false;
  ScanAlgorithm algorithm = ScanAlgorithm::kDefault;
  // Set: folded into every result, out[i] = op(carry, scan[i]) after the scan (an exclusive
  // scan's out[0] is carry itself): the raw bits of one element of dtype, in the low bytes.
  std::optional<uint64_t> carry;
};

struct ReduceSpec {
  DType dtype = DType::kInt32;
  Op op = Op::kSum;
};

// A segmented scan (gpuscan/kernels/segmented.h): segments are runs of equal consecutive keys
// (key_dtype, an integer dtype) or begin at nonzero head bytes (heads).
struct SegmentedScanSpec {
  DType dtype = DType::kInt32;
  Op op = Op::kSum;
  bool exclusive = false;
  bool heads = false;  // else keys of key_dtype
  DType key_dtype = DType::kInt32;
};

// A 2-D inclusive scan (summed-area table) of a row-major matrix of `cols` columns. The
// association is fixed: rows fold left to right, then columns top to bottom.
// Which scan of a matrix: both axes (the summed-area table), or each column (numpy's axis=0)
// or each row (axis=1) on its own.
enum class ScanAxis { kBoth, kColumns, kRows };

struct Scan2DSpec {
  DType dtype = DType::kInt32;
  Op op = Op::kSum;
  uint64_t cols = 1;
  ScanAxis axis = ScanAxis::kBoth;
  bool exclusive = false;  // axis scans only
};

// A stable sort (gpuscan/kernels/sort_keys.h gives the order): the keys, and what comes out.
struct SortSpec {
  DType dtype = DType::kInt32;  // the keys
  bool descending = false;
  bool want_keys = true;
  bool has_values = false;  // values of values_dtype move with the keys
  DType values_dtype = DType::kInt32;
  bool want_indices = false;  // the permutation (int64 input positions)
};

// A predicate's operands, already converted to the array's dtype by the caller and stored as
// one raw little-endian element each (8 bytes hold any dtype).
struct Predicate {
  PredicateOp op = PredicateOp::kNonzero;
  unsigned char threshold[8] = {};
  unsigned char upper[8] = {};  // IN_RANGE only: keep threshold <= x < upper
};

struct CompactSpec {
  DType dtype = DType::kInt32;
  bool use_flags = false;  // else `predicate` selects
  Predicate predicate;
  bool want_values = true;
  bool want_indices = false;
};

// A histogram's bins (see gpuscan/kernels/histogram_bins.h for the semantics): bins + 1
// non-decreasing edges, already rounded for the dtype when they are even ones.
struct HistogramSpec {
  DType dtype = DType::kInt32;
  std::vector<double> edges;
  bool even = false;  // edges from hist::EvenEdges (lets the bin be guessed, then corrected)
};
// The most bins a histogram may have (Limits.max_histogram_bins): the counts travel in one
// response, and a block's counters stay in shared memory up to a few thousand.
inline constexpr uint32_t kMaxHistogramBins = 1u << 16;
// Throws Error(kInvalidArgument) unless spec.edges holds 2 to kMaxHistogramBins + 1 edges, none
// NaN, none below the one before it (the server checks the wire fields first, naming them).
void CheckHistogramSpec(const HistogramSpec& spec);

}  // namespace gpuscan::engine
