// The one place a runtime (dtype, operator) pair becomes a template instantiation.
// Visit(dtype, op, f) calls f(Type<T>{}, Type<OpFunctor<T>>{}); bitwise operators on float
// dtypes throw Error(kInvalidArgument) instead of instantiating.
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>

#include "engine/types.h"
#include "gpuscan/kernels/operators.h"

namespace gpuscan::engine {

template <class T>
struct Type {
  using type = T;
};

template <class F>
decltype(auto) VisitDType(DType dtype, F&& f) {
  switch (dtype) {
    case DType::kInt32: return f(Type<int32_t>{});
    case DType::kInt64: return f(Type<int64_t>{});
    case DType::kUInt32: return f(Type<uint32_t>{});
    case DType::kUInt64: return f(Type<uint64_t>{});
    case DType::kFloat32: return f(Type<float>{});
    case DType::kFloat64: return f(Type<double>{});
  }
  throw Error(ErrorCode::kInvalidArgument, "unknown dtype");
}

template <class F>
decltype(auto) Visit(DType dtype, Op op, F&& f) {
  return VisitDType(dtype, [&](auto t) -> decltype(auto) {
    using T = typename decltype(t)::type;
    switch (op) {
      case Op::kSum: return f(t, Type<ops::Sum<T>>{});
      case Op::kProduct: return f(t, Type<ops::Product<T>>{});
      case Op::kMin: return f(t, Type<ops::Min<T>>{});
      case Op::kMax: return f(t, Type<ops::Max<T>>{});
      default: break;
    }
    if constexpr (std::is_integral_v<T>) {
      switch (op) {
        case Op::kBitAnd: return f(t, Type<ops::BitAnd<T>>{});
        case Op::kBitOr: return f(t, Type<ops::BitOr<T>>{});
        case Op::kBitXor: return f(t, Type<ops::BitXor<T>>{});
        default: break;
      }
      throw Error(ErrorCode::kInvalidArgument, "unknown operator");
    } else {
      // Only a known bitwise operator may be named: Name() indexes a table by the enum value.
      if (!IsBitwise(op)) throw Error(ErrorCode::kInvalidArgument, "unknown operator");
      throw Error(ErrorCode::kInvalidArgument,
                  "operator " + std::string(Name(op)) + " is not defined for dtype " +
                      std::string(Name(dtype)));
    }
  });
}

}  // namespace gpuscan::engine
