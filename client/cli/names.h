// Command-line names of the wire enums ("int32", "sum", "decoupled_lookback", "in_range"),
// derived from the proto's own value names so new enum values need no table here.
#pragma once

#include <string>
#include <vector>

#include "gpuscan/v1/gpuscan.pb.h"

namespace gpuscan::cli {

std::string DTypeName(v1::DType v);              // DTYPE_INT32 -> "int32"
std::string OperatorName(v1::Operator v);        // OPERATOR_BIT_AND -> "bit_and"
std::string AlgorithmName(v1::ScanAlgorithm v);  // SCAN_ALGORITHM_CUB -> "cub"

// Every accepted name (UNSPECIFIED values excluded), for --help and validation.
std::vector<std::string> DTypeNames();
std::vector<std::string> OperatorNames();
std::vector<std::string> AlgorithmNames();
std::vector<std::string> PredicateNames();
std::vector<std::string> CompactOutputNames();  // "values", "indices", "both"

// Name to value; throw std::invalid_argument listing the accepted names.
v1::DType ParseDType(const std::string& name);
v1::Operator ParseOperator(const std::string& name);
v1::ScanAlgorithm ParseAlgorithm(const std::string& name);
v1::PredicateOp ParsePredicate(const std::string& name);
v1::CompactOutput ParseCompactOutput(const std::string& name);

// Narrow inputs (int8, uint8, int16, uint16, float16): scan and reduce accumulate them in a wider
// dtype. OutputDType: --out-dtype when given, else numpy's default for a narrow input (int64,
// uint64, float16 stays float16), else the input's own.
bool IsNarrow(v1::DType t);
v1::DType OutputDType(v1::DType in, const std::string& out_option);
// The streamed options a narrow call cannot take: --shm, --shards (lanes are set to 1).
void CheckNarrowStreamed(v1::DType in, bool shm, uint32_t shards);
bool IsFloat(v1::DType t);
bool IsSigned(v1::DType t);  // signed integers only
// One raw little-endian element of any dtype, narrow ones included, as float64 (as numpy converts it).
double ElementAsDouble(const void* raw, v1::DType dtype);

// A threshold given on the command line as the Scalar kind the dtype needs: int_value for
// signed integers, uint_value for unsigned, float_value for floats. Throws
// std::invalid_argument when the text is not such a number.
v1::Scalar ParseScalar(const std::string& text, v1::DType dtype);
// The same for an option's value: a value that does not parse names the flag and the dtype.
v1::Scalar ParseScalar(const std::string& text, v1::DType dtype, const std::string& flag);

// scan --carry: the text as one raw little-endian element of the results' dtype (ScanHeader.carry).
// Throws std::invalid_argument naming --carry and the dtype when the text is not such a value
// (an integer out of the dtype's range included).
std::string ParseCarry(const std::string& text, v1::DType results);

}  // namespace gpuscan::cli
