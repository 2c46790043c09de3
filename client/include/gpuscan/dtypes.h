// The element types: a C++ type's wire dtype and back, and the bytes of an element.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "gpuscan/v1/gpuscan.pb.h"

namespace gpuscan {

// The wire dtype of a C++ element type.
template <class T>
constexpr v1::DType DTypeOf() {
  if constexpr (std::is_same_v<T, int32_t>) return v1::DTYPE_INT32;
  else if constexpr (std::is_same_v<T, int64_t>) return v1::DTYPE_INT64;
  else if constexpr (std::is_same_v<T, uint32_t>) return v1::DTYPE_UINT32;
  else if constexpr (std::is_same_v<T, uint64_t>) return v1::DTYPE_UINT64;
  else if constexpr (std::is_same_v<T, float>) return v1::DTYPE_FLOAT32;
  else if constexpr (std::is_same_v<T, double>) return v1::DTYPE_FLOAT64;
  else static_assert(sizeof(T) == 0, "gpuscan: unsupported element type");
}

// f(T{}) with the C++ element type of a wire dtype; std::invalid_argument for any other value.
template <class F>
decltype(auto) WithElementType(v1::DType dtype, F&& f) {
  switch (dtype) {
    case v1::DTYPE_INT32: return f(int32_t{});
    case v1::DTYPE_INT64: return f(int64_t{});
    case v1::DTYPE_UINT32: return f(uint32_t{});
    case v1::DTYPE_UINT64: return f(uint64_t{});
    case v1::DTYPE_FLOAT32: return f(float{});
    case v1::DTYPE_FLOAT64: return f(double{});
    default: throw std::invalid_argument("gpuscan: dtype " + std::to_string(static_cast<int>(dtype)) +
                                         " is not a served DType");
  }
}

// Bytes per element of a dtype; 0 for DTYPE_UNSPECIFIED or an unknown value.
size_t DTypeSize(v1::DType dtype);
// The element size of a scan's results: header.output_dtype's, else a narrow dtype's default
// output (numpy's: 8 bytes for INT8/UINT8/INT16/UINT16, FLOAT16 stays 2), else the dtype's.
size_t ScanOutputSize(const v1::ScanHeader& header);
// The same for any header that accumulates (Scan2D, SegmentedScan, ReduceByKey): its dtype and output_dtype.
size_t ScanOutputSize(v1::DType dtype, v1::DType output_dtype);

}  // namespace gpuscan
