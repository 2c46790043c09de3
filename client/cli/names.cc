// Enum names from the proto descriptors: strip the common prefix, lowercase the rest.
#include "names.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <stdexcept>

#include "gpuscan/client.h"
#include "gpuscan/kernels/half.h"

#include "text_format.h"

namespace gpuscan::cli {
namespace {

namespace pb = google::protobuf;

std::string Strip(const std::string& full, const std::string& prefix) {
  std::string s = full.compare(0, prefix.size(), prefix) == 0 ? full.substr(prefix.size()) : full;
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

std::string NameOf(const pb::EnumDescriptor* d, int value, const std::string& prefix) {
  const pb::EnumValueDescriptor* v = d->FindValueByNumber(value);
  return v ? Strip(v->name(), prefix) : std::to_string(value);
}

std::vector<std::string> NamesOf(const pb::EnumDescriptor* d, const std::string& prefix) {
  std::vector<std::string> names;
  for (int i = 0; i < d->value_count(); ++i) {
    std::string n = Strip(d->value(i)->name(), prefix);
    if (n != "unspecified") names.push_back(n);
  }
  return names;
}

std::string Join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

int ValueOf(const pb::EnumDescriptor* d, const std::string& prefix, const std::string& name,
            const char* what) {
  for (int i = 0; i < d->value_count(); ++i) {
    std::string n = Strip(d->value(i)->name(), prefix);
    if (n == name && n != "unspecified") return d->value(i)->number();
  }
  throw std::invalid_argument("unknown " + std::string(what) + " '" + name + "' (choose from " +
                              Join(NamesOf(d, prefix)) + ")");
}

}  // namespace

std::string DTypeName(v1::DType v) { return NameOf(v1::DType_descriptor(), v, "DTYPE_"); }
std::string OperatorName(v1::Operator v) {
  return NameOf(v1::Operator_descriptor(), v, "OPERATOR_");
}
std::string AlgorithmName(v1::ScanAlgorithm v) {
  return NameOf(v1::ScanAlgorithm_descriptor(), v, "SCAN_ALGORITHM_");
}

std::vector<std::string> DTypeNames() { return NamesOf(v1::DType_descriptor(), "DTYPE_"); }
std::vector<std::string> OperatorNames() {
  return NamesOf(v1::Operator_descriptor(), "OPERATOR_");
}
std::vector<std::string> AlgorithmNames() {
  return NamesOf(v1::ScanAlgorithm_descriptor(), "SCAN_ALGORITHM_");
}
std::vector<std::string> PredicateNames() {
  return NamesOf(v1::PredicateOp_descriptor(), "PREDICATE_OP_");
}
std::vector<std::string> CompactOutputNames() { return {"values", "indices", "both"}; }

v1::DType ParseDType(const std::string& name) {
  return static_cast<v1::DType>(ValueOf(v1::DType_descriptor(), "DTYPE_", name, "dtype"));
}
v1::Operator ParseOperator(const std::string& name) {
  return static_cast<v1::Operator>(
      ValueOf(v1::Operator_descriptor(), "OPERATOR_", name, "operator"));
}
v1::ScanAlgorithm ParseAlgorithm(const std::string& name) {
  return static_cast<v1::ScanAlgorithm>(
      ValueOf(v1::ScanAlgorithm_descriptor(), "SCAN_ALGORITHM_", name, "scan algorithm"));
}
v1::PredicateOp ParsePredicate(const std::string& name) {
  return static_cast<v1::PredicateOp>(
      ValueOf(v1::PredicateOp_descriptor(), "PREDICATE_OP_", name, "predicate"));
}
v1::CompactOutput ParseCompactOutput(const std::string& name) {
  if (name == "values") return v1::COMPACT_OUTPUT_VALUES;
  if (name == "indices") return v1::COMPACT_OUTPUT_INDICES;
  if (name == "both") return v1::COMPACT_OUTPUT_VALUES_AND_INDICES;
  throw std::invalid_argument("unknown output kind '" + name +
                              "' (choose from values, indices, both)");
}

bool IsNarrow(v1::DType t) { return t >= v1::DTYPE_INT8 && t <= v1::DTYPE_FLOAT16; }

v1::DType OutputDType(v1::DType in, const std::string& out_option) {
  if (!out_option.empty()) return ParseDType(out_option);
  switch (in) {
    case v1::DTYPE_INT8:
    case v1::DTYPE_INT16: return v1::DTYPE_INT64;
    case v1::DTYPE_UINT8:
    case v1::DTYPE_UINT16: return v1::DTYPE_UINT64;
    default: return in;
  }
}

void CheckNarrowStreamed(v1::DType in, bool shm, uint32_t shards) {
  if (!IsNarrow(in) || (!shm && shards <= 1)) return;
  throw std::runtime_error("a " + DTypeName(in) + " input streams on one connection: drop " +
                           (shm ? "--shm" : "--shards") + " (or convert the file to the output dtype first)");
}

double ElementAsDouble(const void* raw, v1::DType dtype) {
  auto as_double = [raw](auto v) {
    std::memcpy(&v, raw, sizeof v);
    return static_cast<double>(v);
  };
  switch (dtype) {
    case v1::DTYPE_INT8: return as_double(int8_t{});
    case v1::DTYPE_UINT8: return as_double(uint8_t{});
    case v1::DTYPE_INT16: return as_double(int16_t{});
    case v1::DTYPE_UINT16: return as_double(uint16_t{});
    case v1::DTYPE_FLOAT16: {
      uint16_t h;
      std::memcpy(&h, raw, 2);
      return half::HalfToFloat(h);
    }
    default: return WithElementType(dtype, as_double);
  }
}

bool IsFloat(v1::DType t) { return t == v1::DTYPE_FLOAT32 || t == v1::DTYPE_FLOAT64 || t == v1::DTYPE_FLOAT16; }
bool IsSigned(v1::DType t) {
  return t == v1::DTYPE_INT32 || t == v1::DTYPE_INT64 || t == v1::DTYPE_INT8 || t == v1::DTYPE_INT16;
}

v1::Scalar ParseScalar(const std::string& text, v1::DType dtype, const std::string& flag) {
  try {
    return ParseScalar(text, dtype);
  } catch (const std::exception&) {
    throw std::invalid_argument(flag + " '" + text + "': not " + (IsFloat(dtype) ? "a number" : "an integer") +
                                " (the input is " + DTypeName(dtype) + ")");
  }
}

v1::Scalar ParseScalar(const std::string& text, v1::DType dtype) {
  v1::Scalar s;
  // Parsed as the widest type of its kind; the server checks that the value fits the dtype.
  if (IsFloat(dtype)) {
    double v;
    ParseElement(text, v1::DTYPE_FLOAT64, &v);
    s.set_float_value(v);
  } else if (IsSigned(dtype)) {
    int64_t v;
    ParseElement(text, v1::DTYPE_INT64, &v);
    s.set_int_value(v);
  } else {
    uint64_t v;
    ParseElement(text, v1::DTYPE_UINT64, &v);
    s.set_uint_value(v);
  }
  return s;
}

std::string ParseCarry(const std::string& text, v1::DType results) {
  std::string raw(DTypeSize(results), '\0');
  try {
    ParseElement(text, results, raw.data());
  } catch (const std::exception&) {
    throw std::invalid_argument("--carry '" + text + "': not a " + DTypeName(results) +
                                " value (a carry is an element of the results' dtype)");
  }
  return raw;
}

}  // namespace gpuscan::cli
