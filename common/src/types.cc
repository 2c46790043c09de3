#include "gpuscan/types.h"

namespace gpuscan::types {

std::size_t SizeOf(DType t) {
  switch (t) {
    case DType::kInt32:
    case DType::kUInt32:
    case DType::kFloat32:
      return 4;
    case DType::kInt64:
    case DType::kUInt64:
    case DType::kFloat64:
      return 8;
  }
  return 0;
}

bool IsFloat(DType t) { return t == DType::kFloat32 || t == DType::kFloat64; }
bool IsSigned(DType t) { return t == DType::kInt32 || t == DType::kInt64; }
bool IsBitwise(Op op) { return op == Op::kBitAnd || op == Op::kBitOr || op == Op::kBitXor; }

std::string_view Name(DType t) {
  static constexpr std::string_view kNames[] = {"int32",  "int64",   "uint32",
                                                "uint64", "float32", "float64"};
  return kNames[static_cast<int>(t)];
}

std::string_view Name(Op op) {
  static constexpr std::string_view kNames[] = {"sum",     "product", "min",    "max",
                                                "bit_and", "bit_or",  "bit_xor"};
  return kNames[static_cast<int>(op)];
}

std::string_view Name(ScanAlgorithm a) {
  static constexpr std::string_view kNames[] = {
      "default",    "decoupled_lookback", "chained",       "reduce_then_scan",
      "kogge_stone", "brent_kung",        "blelloch",      "hillis_steele",
      "cub",        "cpu_blocked",        "deterministic"};
  return kNames[static_cast<int>(a)];
}

std::string_view Name(PredicateOp p) {
  static constexpr std::string_view kNames[] = {"nonzero", "eq", "ne", "lt",     "le",
                                                "gt",      "ge", "in_range", "not_nan"};
  return kNames[static_cast<int>(p)];
}

}  // namespace gpuscan::types
