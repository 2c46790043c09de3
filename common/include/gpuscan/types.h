// gpuscan's shared vocabulary: element types, operators, scan algorithms, predicates and the
// errors that name what went wrong. A leaf: plain C++ (no protobuf, no CUDA, no gRPC), used by
// the kernels (predicates), the server's engines and service, the kernel suite (bench/) and the
// CLI, so none of them reaches into another for these words. The wire API (gpuscan.v1) maps onto them by value.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

namespace gpuscan::types {

enum class DType { kInt32, kInt64, kUInt32, kUInt64, kFloat32, kFloat64 };
inline constexpr DType kAllDTypes[] = {DType::kInt32,  DType::kInt64,   DType::kUInt32,
                                       DType::kUInt64, DType::kFloat32, DType::kFloat64};

enum class Op { kSum, kProduct, kMin, kMax, kBitAnd, kBitOr, kBitXor };
inline constexpr Op kAllOps[] = {Op::kSum,    Op::kProduct, Op::kMin,   Op::kMax,
                                 Op::kBitAnd, Op::kBitOr,   Op::kBitXor};

// Mirrors gpuscan.v1.ScanAlgorithm (same order, so the server maps by value).
enum class ScanAlgorithm {
  kDefault,
  kDecoupledLookback,
  kChained,
  kReduceThenScan,
  kKoggeStone,
  kBrentKung,
  kBlelloch,
  kHillisSteele,
  kCub,
  kCpuBlocked,
  // Float SUM/PRODUCT in the canonical tree (gpuscan/kernels/canonical_tree.h): the same bits
  // for the same input on every run, chunking, thread count and engine. The default for those.
  kDeterministic,
};

enum class PredicateOp { kNonzero, kEq, kNe, kLt, kLe, kGt, kGe, kInRange, kNotNan };

std::size_t SizeOf(DType t);
bool IsFloat(DType t);
bool IsSigned(DType t);
std::string_view Name(DType t);            // "int32", ...
std::string_view Name(Op op);              // "sum", ...
std::string_view Name(ScanAlgorithm a);    // "decoupled_lookback", ...
std::string_view Name(PredicateOp p);      // "lt", ...
bool IsBitwise(Op op);

// Why an engine call failed; the server maps each to one gRPC status code.
enum class ErrorCode { kInvalidArgument, kUnimplemented, kResourceExhausted, kUnavailable, kInternal, kFailedPrecondition };

class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message) : std::runtime_error(message), code_(code) {}
  ErrorCode code() const { return code_; }

 private:
  ErrorCode code_;
};

}  // namespace gpuscan::types
