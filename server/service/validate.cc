// Request validation, the header's side (validate.h): each RPC's wire header to its engine spec,
// and the scalar and dtype conversions those share. The checks of the stream that follows are in
// validate_stream.cc.
#include "service/validate.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>

#include "engine/dispatch.h"
#include "engine/histogram.h"
#include "service/status.h"

namespace gpuscan::server {
namespace {

grpc::Status ToEngineOp(int wire, engine::DType dtype, const char* field, engine::Op* out) {
  if (wire == v1::OPERATOR_UNSPECIFIED) {
    return InvalidArgument(std::string(field) +
                           " is OPERATOR_UNSPECIFIED; set SUM, PRODUCT, MIN, MAX, BIT_AND, BIT_OR or BIT_XOR");
  }
  if (!v1::Operator_IsValid(wire)) {
    return InvalidArgument(std::string(field) + "=" + std::to_string(wire) + " is not a known Operator");
  }
  *out = static_cast<engine::Op>(wire - v1::OPERATOR_SUM);
  if (engine::IsBitwise(*out) && engine::IsFloat(dtype)) {
    return InvalidArgument(std::string(field) + "=" + v1::Operator_Name(wire) +
                           " is not defined for dtype " + std::string(engine::Name(dtype)) +
                           " (bitwise operators take integer dtypes only)");
  }
  return grpc::Status::OK;
}

template <class T>
grpc::Status FitInteger(const v1::Scalar& s, const std::string& field, const std::string& dtype, T* out) {
  auto out_of_range = [&](const std::string& v) {
    return InvalidArgument(field + "=" + v + " does not fit dtype " + dtype);
  };
  if (s.value_case() == v1::Scalar::kIntValue) {
    int64_t v = s.int_value();
    if constexpr (std::is_signed_v<T>) {
      if (v < std::numeric_limits<T>::lowest() || v > std::numeric_limits<T>::max()) return out_of_range(std::to_string(v));
    } else {
      if (v < 0 || static_cast<uint64_t>(v) > std::numeric_limits<T>::max()) return out_of_range(std::to_string(v));
    }
    *out = static_cast<T>(v);
    return grpc::Status::OK;
  }
  uint64_t v = s.uint_value();
  if (v > static_cast<uint64_t>(std::numeric_limits<T>::max())) return out_of_range(std::to_string(v));
  *out = static_cast<T>(v);
  return grpc::Status::OK;
}

// The shortest text that reads back as exactly `v` ("1.5", "1e+300", "nan").
std::string ShortestText(double v) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof(buf), v);
  return std::string(buf, r.ptr);
}

// How a Scalar was set, for messages: "int_value=3", "uint_value=7", "float_value=1.5".
std::string DescribeScalar(const v1::Scalar& s) {
  switch (s.value_case()) {
    case v1::Scalar::kIntValue: return "int_value=" + std::to_string(s.int_value());
    case v1::Scalar::kUintValue: return "uint_value=" + std::to_string(s.uint_value());
    case v1::Scalar::kFloatValue: return "float_value=" + ShortestText(s.float_value());
    case v1::Scalar::VALUE_NOT_SET: break;
  }
  return "nothing";
}

}  // namespace

grpc::Status CheckScanAlgorithm(engine::ScanAlgorithm wanted, const std::vector<engine::ScanAlgorithm>& offered,
                                const std::string& engine_name) {
  if (std::find(offered.begin(), offered.end(), wanted) != offered.end()) return grpc::Status::OK;
  std::string names;
  for (engine::ScanAlgorithm a : offered) {
    if (a == engine::ScanAlgorithm::kDefault) continue;
    names += (names.empty() ? "" : ", ") + std::string(engine::Name(a));
  }
  return {grpc::StatusCode::UNIMPLEMENTED, "header.algorithm=" + std::string(engine::Name(wanted)) +
                                               " is not available on the " + engine_name +
                                               " engine (available: " + names + ")"};
}

grpc::Status ToEngineDType(int wire, engine::DType* out, const char* field) {
  if (wire == v1::DTYPE_UNSPECIFIED) {
    return InvalidArgument(std::string(field) +
                           " is DTYPE_UNSPECIFIED; set INT32, INT64, UINT32, UINT64, FLOAT32 or FLOAT64");
  }
  if (!v1::DType_IsValid(wire)) {
    return InvalidArgument(std::string(field) + "=" + std::to_string(wire) + " is not a known DType");
  }
  if (IsNarrow(wire)) {
    return InvalidArgument(std::string(field) + "=" + v1::DType_Name(wire) +
                           ": narrow dtypes are served as the values of streamed Scan, Reduce, SegmentedScan, "
                           "ReduceByKey, Scan2D, Compact, Sort and Histogram calls (no lanes, shared or device "
                           "memory); here use INT32, INT64, UINT32, UINT64, FLOAT32 or FLOAT64");
  }
  *out = static_cast<engine::DType>(wire - v1::DTYPE_INT32);
  return grpc::Status::OK;
}

namespace {

// Scan's and Reduce's dtype, output_dtype and op (see ScanHeader.output_dtype).
grpc::Status ToEngineInput(int dtype, int output, int op, engine::DType* engine, std::optional<NarrowInput>* narrow) {
  if (narrow == nullptr || !IsNarrow(dtype)) {
    if (auto s = ToEngineDType(dtype, engine); !s.ok()) return s;
    if (output != v1::DTYPE_UNSPECIFIED && output != dtype) {
      return InvalidArgument("header.output_dtype=" + (v1::DType_IsValid(output) ? v1::DType_Name(output)
                                                                                  : std::to_string(output)) +
                             " differs from header.dtype=" + v1::DType_Name(dtype) +
                             ": an output dtype of its own is for narrow inputs (INT8, UINT8, INT16, UINT16, "
                             "FLOAT16)");
    }
    return grpc::Status::OK;
  }
  const auto in = static_cast<v1::DType>(dtype);
  const bool half = in == v1::DTYPE_FLOAT16;
  if (half && (op == v1::OPERATOR_BIT_AND || op == v1::OPERATOR_BIT_OR || op == v1::OPERATOR_BIT_XOR)) {
    return InvalidArgument("header.op=" + v1::Operator_Name(op) +
                           " is not defined for dtype float16 (bitwise operators take integer dtypes only)");
  }
  int out = output;
  if (out == v1::DTYPE_UNSPECIFIED) {  // numpy's rule
    out = half ? v1::DTYPE_FLOAT16
               : (in == v1::DTYPE_INT8 || in == v1::DTYPE_INT16 ? v1::DTYPE_INT64 : v1::DTYPE_UINT64);
  }
  const std::string named = "header.output_dtype=" + (v1::DType_IsValid(out) ? v1::DType_Name(out) : std::to_string(out));
  if (!v1::DType_IsValid(out)) return InvalidArgument(named + " is not a known DType");
  NarrowInput n{in, NarrowSize(in), false};
  if (half && out == v1::DTYPE_FLOAT16) {
    n.half_out = true;
    out = v1::DTYPE_FLOAT32;  // accumulated in float32, rounded once per element
  } else if (IsNarrow(out)) {
    return InvalidArgument(named + " for header.dtype=" + v1::DType_Name(in) +
                           ": a narrow output is served for FLOAT16 input only; use a 4- or 8-byte output_dtype");
  } else if (half && out != v1::DTYPE_FLOAT32 && out != v1::DTYPE_FLOAT64) {
    return InvalidArgument(named + " for header.dtype=DTYPE_FLOAT16: a float16 input accumulates in FLOAT16, "
                           "FLOAT32 or FLOAT64");
  }
  *engine = static_cast<engine::DType>(out - v1::DTYPE_INT32);
  *narrow = n;
  return grpc::Status::OK;
}

// header.kind of the scan-like calls: whether the scan is exclusive.
grpc::Status ToEngineKind(int kind, bool* exclusive) {
  if (!v1::ScanKind_IsValid(kind)) {
    return InvalidArgument("header.kind=" + std::to_string(kind) + " is not a known ScanKind");
  }
  *exclusive = kind == v1::SCAN_KIND_EXCLUSIVE;
  return grpc::Status::OK;
}

// A dtype taken as it is (Compact, Sort, Histogram): a narrow one runs as its carrier where
// `narrow` is given (service/narrow.h).
grpc::Status ToEngineCarried(int wire, engine::DType* engine, std::optional<NarrowInput>* narrow,
                             const char* field = "header.dtype") {
  if (narrow == nullptr || !IsNarrow(wire)) return ToEngineDType(wire, engine, field);
  const auto in = static_cast<v1::DType>(wire);
  *engine = Carrier(in);
  *narrow = NarrowInput{in, NarrowSize(in), false};
  return grpc::Status::OK;
}

}  // namespace

grpc::Status NarrowStreamedOnly(const std::optional<NarrowInput>& narrow, bool shared_memory, bool device_memory,
                                const char* field) {
  if (!narrow || (!shared_memory && !device_memory)) return grpc::Status::OK;
  return InvalidArgument(std::string(shared_memory ? "header.shared_memory" : "header.device_memory") + ": a narrow " +
                         field + "=" + v1::DType_Name(narrow->wire) +
                         " is served in the stream only (send the chunks, or widen the array first)");
}

v1::DType ToWire(engine::DType t) { return static_cast<v1::DType>(static_cast<int>(t) + v1::DTYPE_INT32); }
v1::ScanAlgorithm ToWire(engine::ScanAlgorithm a) { return static_cast<v1::ScanAlgorithm>(static_cast<int>(a)); }

grpc::Status ToEngine(const v1::ScanHeader& h, engine::ScanSpec* spec, std::optional<NarrowInput>* narrow) {
  if (auto s = ToEngineInput(h.dtype(), h.output_dtype(), h.op(), &spec->dtype, narrow); !s.ok()) return s;
  if (auto s = ToEngineOp(h.op(), spec->dtype, "header.op", &spec->op); !s.ok()) return s;
  if (auto s = ToEngineKind(h.kind(), &spec->exclusive); !s.ok()) return s;
  if (!v1::ScanAlgorithm_IsValid(h.algorithm())) {
    return InvalidArgument("header.algorithm=" + std::to_string(h.algorithm()) + " is not a known ScanAlgorithm");
  }
  spec->algorithm = static_cast<engine::ScanAlgorithm>(h.algorithm());
  if (!h.has_carry()) return grpc::Status::OK;
  // header.carry: one element of the results' dtype. A FLOAT16 output is rounded after the
  // engine's float32 results, so a carry folded there would not be numpy's float16 fold.
  const std::optional<NarrowInput> none;
  const std::string result = AccumulatedName(narrow ? *narrow : none, spec->dtype);
  if (narrow && *narrow && (*narrow)->half_out) {
    return InvalidArgument("header.carry with a float16 output is not served (the carry is folded into the "
                           "float32 accumulator, before each result is rounded): scan into FLOAT32 or FLOAT64");
  }
  const size_t size = engine::SizeOf(spec->dtype);
  if (h.carry().size() != size) {
    return InvalidArgument("header.carry has " + std::to_string(h.carry().size()) + " bytes: one " + result +
                           " element (the results' dtype) is " + std::to_string(size));
  }
  uint64_t bits = 0;
  std::memcpy(&bits, h.carry().data(), size);  // little-endian hosts only (wire.h)
  spec->carry = bits;
  return grpc::Status::OK;
}

// header.key_dtype: an integer dtype (keys are compared for equality only).
static grpc::Status ToKeyDType(int k, engine::DType* out) {
  if (!v1::DType_IsValid(k) || k == v1::DTYPE_UNSPECIFIED) {
    return InvalidArgument("header.key_dtype=" + std::to_string(k) + " is not a known DType");
  }
  if (k == v1::DTYPE_FLOAT32 || k == v1::DTYPE_FLOAT64) {
    return InvalidArgument("header.key_dtype=" + v1::DType_Name(static_cast<v1::DType>(k)) +
                           ": segment keys must be INT32, INT64, UINT32 or UINT64");
  }
  return ToEngineDType(k, out, "header.key_dtype");
}

grpc::Status ToEngine(const v1::SegmentedScanHeader& h, engine::SegmentedScanSpec* spec,
                      std::optional<NarrowInput>* narrow) {
  if (auto s = ToEngineInput(h.dtype(), h.output_dtype(), h.op(), &spec->dtype, narrow); !s.ok()) return s;
  if (auto s = ToEngineOp(h.op(), spec->dtype, "header.op", &spec->op); !s.ok()) return s;
  if (auto s = ToEngineKind(h.kind(), &spec->exclusive); !s.ok()) return s;
  switch (h.segments_case()) {
    case v1::SegmentedScanHeader::kHeads:
      if (!h.heads()) {
        return InvalidArgument("header.heads=false selects no segments; set heads=true or key_dtype");
      }
      spec->heads = true;
      return grpc::Status::OK;
    case v1::SegmentedScanHeader::kKeyDtype:
      spec->heads = false;
      return ToKeyDType(h.key_dtype(), &spec->key_dtype);
    case v1::SegmentedScanHeader::SEGMENTS_NOT_SET: break;
  }
  return InvalidArgument("header sets neither key_dtype nor heads; set one to say where segments begin");
}

grpc::Status ToEngine(const v1::ReduceByKeyHeader& h, engine::SegmentedScanSpec* spec,
                      std::optional<NarrowInput>* narrow) {
  if (auto s = ToEngineInput(h.dtype(), h.output_dtype(), h.op(), &spec->dtype, narrow); !s.ok()) return s;
  if (auto s = ToEngineOp(h.op(), spec->dtype, "header.op", &spec->op); !s.ok()) return s;
  spec->exclusive = false;
  spec->heads = false;
  return ToKeyDType(h.key_dtype(), &spec->key_dtype);
}

grpc::Status ToEngine(const v1::Scan2DHeader& h, uint64_t max_row_bytes, engine::Scan2DSpec* spec,
                      std::optional<NarrowInput>* narrow) {
  if (auto s = ToEngineInput(h.dtype(), h.output_dtype(), h.op(), &spec->dtype, narrow); !s.ok()) return s;
  if (auto s = ToEngineOp(h.op(), spec->dtype, "header.op", &spec->op); !s.ok()) return s;
  if (h.cols() == 0) return InvalidArgument("header.cols=0: a matrix needs at least one column");
  const uint64_t size = engine::SizeOf(spec->dtype);
  if (h.cols() > max_row_bytes / size) {
    return ResourceExhausted("header.cols=" + std::to_string(h.cols()) + " makes rows of more than " +
                             std::to_string(max_row_bytes) + " bytes of " + std::string(engine::Name(spec->dtype)) +
                             " (--max-scan2d-row-bytes, Limits.max_scan2d_row_bytes)");
  }
  if (h.has_rows() && h.rows() != 0 && h.cols() > UINT64_MAX / size / h.rows()) {
    return InvalidArgument("header.rows=" + std::to_string(h.rows()) + " x header.cols=" + std::to_string(h.cols()) +
                           " overflows a byte count");
  }
  switch (h.axis()) {
    case v1::SCAN_AXIS_BOTH: spec->axis = engine::ScanAxis::kBoth; break;
    case v1::SCAN_AXIS_COLUMNS: spec->axis = engine::ScanAxis::kColumns; break;
    case v1::SCAN_AXIS_ROWS: spec->axis = engine::ScanAxis::kRows; break;
    default: return InvalidArgument("header.axis=" + std::to_string(h.axis()) + " is not a known ScanAxis");
  }
  if (auto s = ToEngineKind(h.kind(), &spec->exclusive); !s.ok()) return s;
  if (spec->exclusive && spec->axis == engine::ScanAxis::kBoth) {
    return InvalidArgument("header.kind=SCAN_KIND_EXCLUSIVE applies to axis scans only; header.axis=SCAN_AXIS_BOTH "
                           "(the 2-D scan) is inclusive");
  }
  spec->cols = h.cols();
  return grpc::Status::OK;
}

grpc::Status ToEngine(const v1::SortHeader& h, engine::SortSpec* spec, std::optional<NarrowInput>* narrow_keys,
                      std::optional<NarrowInput>* narrow_values) {
  if (auto s = ToEngineCarried(h.dtype(), &spec->dtype, narrow_keys); !s.ok()) return s;
  if (!v1::SortOutput_IsValid(h.output())) {
    return InvalidArgument("header.output=" + std::to_string(h.output()) + " is not a known SortOutput");
  }
  spec->descending = h.descending();
  spec->want_keys = h.output() != v1::SORT_OUTPUT_INDICES;
  spec->want_indices = h.output() == v1::SORT_OUTPUT_INDICES || h.output() == v1::SORT_OUTPUT_KEYS_AND_INDICES;
  spec->has_values = h.output() == v1::SORT_OUTPUT_KEYS_AND_VALUES;
  const int vd = h.values_dtype();
  if (!spec->has_values) {
    if (vd != v1::DTYPE_UNSPECIFIED) {
      return InvalidArgument("header.values_dtype=" + std::to_string(vd) + " is set but header.output=" +
                             v1::SortOutput_Name(h.output()) + " has no values; use SORT_OUTPUT_KEYS_AND_VALUES");
    }
    return grpc::Status::OK;
  }
  if (vd == v1::DTYPE_UNSPECIFIED) {
    return InvalidArgument("header.values_dtype is DTYPE_UNSPECIFIED; SORT_OUTPUT_KEYS_AND_VALUES needs the values' dtype");
  }
  if (!v1::DType_IsValid(vd)) {
    return InvalidArgument("header.values_dtype=" + std::to_string(vd) + " is not a known DType");
  }
  return ToEngineCarried(vd, &spec->values_dtype, narrow_values, "header.values_dtype");
}

grpc::Status ToEngine(const v1::ReduceHeader& h, engine::ReduceSpec* spec, std::optional<NarrowInput>* narrow) {
  if (auto s = ToEngineInput(h.dtype(), h.output_dtype(), h.op(), &spec->dtype, narrow); !s.ok()) return s;
  return ToEngineOp(h.op(), spec->dtype, "header.op", &spec->op);
}

grpc::Status ToEngine(const v1::HistogramHeader& h, uint32_t max_bins, engine::HistogramSpec* spec,
                      std::optional<NarrowInput>* narrow) {
  if (auto s = ToEngineCarried(h.dtype(), &spec->dtype, narrow); !s.ok()) return s;
  const bool even = h.bins() != 0, explicit_edges = h.edges_size() != 0;
  if (even == explicit_edges) {
    return InvalidArgument(even ? "header sets both bins=" + std::to_string(h.bins()) + " and " +
                                      std::to_string(h.edges_size()) + " edges; set one"
                                : "header has neither bins nor edges (bins=0 with no edges); set one");
  }
  const uint64_t bins = even ? h.bins() : static_cast<uint64_t>(h.edges_size()) - 1;
  if (bins > max_bins) {
    return InvalidArgument(std::string("header.") + (even ? "bins" : "edges") + ": " + std::to_string(bins) +
                           " bins exceed the server's limit of " + std::to_string(max_bins) +
                           " (Limits.max_histogram_bins)");
  }
  if (even) {
    const double lo = h.lo(), hi = h.hi();
    if (!std::isfinite(lo)) return InvalidArgument("header.lo=" + ShortestText(lo) + " is not finite");
    if (!std::isfinite(hi)) return InvalidArgument("header.hi=" + ShortestText(hi) + " is not finite");
    if (!(lo < hi)) {
      return InvalidArgument("header.lo=" + ShortestText(lo) + " must be below header.hi=" + ShortestText(hi));
    }
    if (!std::isfinite(hi - lo)) {
      return InvalidArgument("header.hi - header.lo (" + ShortestText(hi) + " - " + ShortestText(lo) +
                             ") overflows float64");
    }
    spec->edges = engine::EvenHistogramEdges(lo, hi, h.bins(), spec->dtype);
    spec->even = true;
    // A range of a few ulps (subnormal, say) rounds the step so that the last edges decrease.
    for (size_t i = 1; i < spec->edges.size(); ++i) {
      if (spec->edges[i] < spec->edges[i - 1]) {
        return InvalidArgument("header.lo=" + ShortestText(lo) + ", header.hi=" + ShortestText(hi) +
                               " and header.bins=" + std::to_string(h.bins()) + " give even edges that decrease (edge " +
                               std::to_string(i) + " is below edge " + std::to_string(i - 1) +
                               "): the range is too narrow for that many bins");
      }
    }
    return grpc::Status::OK;
  }
  if (h.edges_size() < 2) {
    return InvalidArgument("header.edges has " + std::to_string(h.edges_size()) + " edge; a bin needs 2");
  }
  for (int i = 0; i < h.edges_size(); ++i) {
    if (std::isnan(h.edges(i))) return InvalidArgument("header.edges[" + std::to_string(i) + "] is NaN");
    if (i > 0 && h.edges(i) < h.edges(i - 1)) {
      return InvalidArgument("header.edges[" + std::to_string(i) + "]=" + ShortestText(h.edges(i)) +
                             " is below header.edges[" + std::to_string(i - 1) + "]=" + ShortestText(h.edges(i - 1)) +
                             "; edges must not decrease");
    }
  }
  spec->edges.assign(h.edges().begin(), h.edges().end());
  spec->even = false;
  return grpc::Status::OK;
}

grpc::Status ToEngine(const v1::CompactHeader& h, engine::CompactSpec* spec, std::optional<NarrowInput>* narrow) {
  if (auto s = ToEngineCarried(h.dtype(), &spec->dtype, narrow); !s.ok()) return s;
  if (!v1::CompactOutput_IsValid(h.output())) {
    return InvalidArgument("header.output=" + std::to_string(h.output()) + " is not a known CompactOutput");
  }
  spec->want_values = h.output() != v1::COMPACT_OUTPUT_INDICES;
  spec->want_indices = h.output() != v1::COMPACT_OUTPUT_VALUES;
  switch (h.selector_case()) {
    case v1::CompactHeader::kUseFlags:
      if (!h.use_flags()) {
        return InvalidArgument("header.use_flags=false selects nothing; set use_flags=true or a predicate");
      }
      spec->use_flags = true;
      return grpc::Status::OK;
    case v1::CompactHeader::kPredicate:
      break;
    default:
      return InvalidArgument("header has no selector; set use_flags=true or a predicate");
  }
  spec->use_flags = false;
  const v1::Predicate& p = h.predicate();
  if (p.op() == v1::PREDICATE_OP_UNSPECIFIED) {
    return InvalidArgument("header.predicate.op is PREDICATE_OP_UNSPECIFIED; set NONZERO, EQ, NE, LT, LE, GT, GE, IN_RANGE or NOT_NAN");
  }
  if (!v1::PredicateOp_IsValid(p.op())) {
    return InvalidArgument("header.predicate.op=" + std::to_string(p.op()) + " is not a known PredicateOp");
  }
  spec->predicate.op = static_cast<engine::PredicateOp>(p.op() - v1::PREDICATE_OP_NONZERO);
  const bool needs_threshold = p.op() != v1::PREDICATE_OP_NONZERO && p.op() != v1::PREDICATE_OP_NOT_NAN;
  // A narrow array's bounds are values of its own dtype (the carrier, spec->dtype, holds them).
  auto bound = [&](const v1::Scalar& v, const std::string& field, unsigned char out[8]) {
    return narrow && *narrow ? NarrowBound(v, **narrow, field, out) : ScalarToElement(v, spec->dtype, field, out);
  };
  if (needs_threshold) {
    if (auto s = bound(p.threshold(), "header.predicate.threshold", spec->predicate.threshold); !s.ok()) return s;
  }
  if (p.op() == v1::PREDICATE_OP_IN_RANGE) {
    if (auto s = bound(p.upper(), "header.predicate.upper", spec->predicate.upper); !s.ok()) return s;
  }
  return grpc::Status::OK;
}

grpc::Status NarrowBound(const v1::Scalar& s, const NarrowInput& narrow, const std::string& field,
                         unsigned char out[8]) {
  const std::string name = NarrowName(narrow.wire);
  const bool is_float = narrow.wire == v1::DTYPE_FLOAT16;
  if (s.value_case() == v1::Scalar::VALUE_NOT_SET) {
    return InvalidArgument(field + " is required for this predicate and is not set");
  }
  if (is_float != (s.value_case() == v1::Scalar::kFloatValue)) {
    return InvalidArgument(field + (is_float ? " must be a float_value" : " must be an int_value or uint_value") +
                           " for dtype " + name + ", got " + DescribeScalar(s));
  }
  if (is_float) {  // in range for float32, the carrier (ScalarToElement's check), then rounded below
    if (auto st = ScalarToElement(s, engine::DType::kFloat32, field, out); !st.ok()) return st;
  }
  auto fit = [&](auto narrow_value, auto carried) -> grpc::Status {
    if (auto st = FitInteger(s, field, name, &narrow_value); !st.ok()) return st;
    carried = narrow_value;
    std::memcpy(out, &carried, sizeof(carried));
    return grpc::Status::OK;
  };
  switch (narrow.wire) {
    case v1::DTYPE_INT8: return fit(int8_t{}, int32_t{});
    case v1::DTYPE_UINT8: return fit(uint8_t{}, uint32_t{});
    case v1::DTYPE_INT16: return fit(int16_t{}, int32_t{});
    case v1::DTYPE_UINT16: return fit(uint16_t{}, uint32_t{});
    default: break;
  }
  // FLOAT16: numpy compares a float16 array with a float in float16 where the float fits it, so
  // the bound is rounded to float16 (to nearest, ties to even); one beyond float16's range stays
  // the float32 that ScalarToElement wrote, as numpy then compares wider (and as the Python
  // client sends it).
  const double v = s.float_value();
  // double -> float rounded to odd, then float -> half to nearest: one correct rounding (float
  // keeps more than two bits beyond half's precision).
  float f = static_cast<float>(v);
  if (std::isfinite(v) && static_cast<double>(f) != v) {
    if (std::fabs(static_cast<double>(f)) > std::fabs(v)) f = std::nextafter(f, 0.0f);
    uint32_t bits;
    std::memcpy(&bits, &f, sizeof(bits));
    bits |= 1u;
    std::memcpy(&f, &bits, sizeof(bits));
  }
  const float rounded = HalfToFloat(FloatToHalf(f));
  if (std::isinf(rounded) && std::isfinite(v)) return grpc::Status::OK;
  std::memcpy(out, &rounded, sizeof(rounded));
  return grpc::Status::OK;
}

grpc::Status ScalarToElement(const v1::Scalar& s, engine::DType dtype, const std::string& field,
                             unsigned char out[8]) {
  if (s.value_case() == v1::Scalar::VALUE_NOT_SET) {
    return InvalidArgument(field + " is required for this predicate and is not set");
  }
  return engine::VisitDType(dtype, [&](auto t) -> grpc::Status {
    using T = typename decltype(t)::type;
    T value{};
    if constexpr (std::is_floating_point_v<T>) {
      if (s.value_case() != v1::Scalar::kFloatValue) {
        return InvalidArgument(field + " must be a float_value for dtype " + std::string(engine::Name(dtype)) +
                               ", got " + DescribeScalar(s));
      }
      // A finite value beyond the dtype's range would round to infinity and change what the
      // predicate selects (x > 1e300 keeps +inf; x > inf keeps nothing): refuse it, as integers
      // that do not fit are refused.
      const double v = s.float_value();
      if (std::isfinite(v) && std::fabs(v) > double(std::numeric_limits<T>::max())) {
        return InvalidArgument(field + "=" + ShortestText(v) + " does not fit dtype " +
                               std::string(engine::Name(dtype)) + " (it would become infinite)");
      }
      value = static_cast<T>(v);
    } else {
      if (s.value_case() == v1::Scalar::kFloatValue) {
        return InvalidArgument(field + " must be an int_value or uint_value for dtype " +
                               std::string(engine::Name(dtype)) + ", got " + DescribeScalar(s));
      }
      if (auto st = FitInteger<T>(s, field, std::string(engine::Name(dtype)), &value); !st.ok()) return st;
    }
    std::memcpy(out, &value, sizeof(T));
    return grpc::Status::OK;
  });
}

v1::Scalar ElementToScalar(const void* element, engine::DType dtype) {
  v1::Scalar s;
  engine::VisitDType(dtype, [&](auto t) {
    using T = typename decltype(t)::type;
    T v;
    std::memcpy(&v, element, sizeof(T));
    if constexpr (std::is_floating_point_v<T>) {
      s.set_float_value(static_cast<double>(v));
    } else if constexpr (std::is_signed_v<T>) {
      s.set_int_value(static_cast<int64_t>(v));
    } else {
      s.set_uint_value(static_cast<uint64_t>(v));
    }
  });
  return s;
}

}  // namespace gpuscan::server
