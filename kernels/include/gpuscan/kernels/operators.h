// Associative operators shared by the CPU engine and the CUDA kernels (host and device code).
// Each is a stateless functor with a static identity(). Integer arithmetic wraps (done in the
// unsigned type, so no signed-overflow UB); float MIN/MAX propagate NaN and order -0 < +0, as
// IEEE 754-2019 minimum/maximum do, which keeps them associative and commutative so any
// association order gives the same answer.
#pragma once

#include <cstdint>
#include <limits>
#include <type_traits>

#if defined(__CUDACC__)
#define GPUSCAN_HD __host__ __device__ __forceinline__
#else
#define GPUSCAN_HD inline
#endif

namespace gpuscan::ops {

template <class T>
using Unsigned = std::make_unsigned_t<T>;

template <class T>
GPUSCAN_HD bool IsNan(T x) {
  if constexpr (std::is_floating_point_v<T>) {
    return x != x;
  } else {
    return false;
  }
}

template <class T>
GPUSCAN_HD bool SignBit(T x) {
  if constexpr (std::is_floating_point_v<T>) {
    return x < T(0) || (x == T(0) && T(1) / x < T(0));
  } else {
    return x < T(0);
  }
}

template <class T>
struct Sum {
  static constexpr const char* kName = "sum";
  GPUSCAN_HD static T identity() { return T(0); }
  GPUSCAN_HD T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      return static_cast<T>(static_cast<Unsigned<T>>(a) + static_cast<Unsigned<T>>(b));
    } else {
      return a + b;
    }
  }
};

template <class T>
struct Product {
  static constexpr const char* kName = "product";
  GPUSCAN_HD static T identity() { return T(1); }
  GPUSCAN_HD T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      return static_cast<T>(static_cast<Unsigned<T>>(a) * static_cast<Unsigned<T>>(b));
    } else {
      return a * b;
    }
  }
};

template <class T>
struct Min {
  static constexpr const char* kName = "min";
  GPUSCAN_HD static T identity() {
    if constexpr (std::is_floating_point_v<T>) {
      return std::numeric_limits<T>::infinity();
    } else {
      return std::numeric_limits<T>::max();
    }
  }
  GPUSCAN_HD T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>) {
      if (IsNan(a)) return a;
      if (IsNan(b)) return b;
      if (a == b) return SignBit(a) ? a : b;  // -0 < +0
    }
    return b < a ? b : a;
  }
};

template <class T>
struct Max {
  static constexpr const char* kName = "max";
  GPUSCAN_HD static T identity() {
    if constexpr (std::is_floating_point_v<T>) {
      return -std::numeric_limits<T>::infinity();
    } else {
      return std::numeric_limits<T>::lowest();
    }
  }
  GPUSCAN_HD T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>) {
      if (IsNan(a)) return a;
      if (IsNan(b)) return b;
      if (a == b) return SignBit(a) ? b : a;  // +0 > -0
    }
    return a < b ? b : a;
  }
};

template <class T>
struct BitAnd {
  static_assert(std::is_integral_v<T>, "bitwise operators are for integers");
  static constexpr const char* kName = "bit_and";
  GPUSCAN_HD static T identity() { return static_cast<T>(~Unsigned<T>(0)); }
  GPUSCAN_HD T operator()(T a, T b) const { return a & b; }
};

template <class T>
struct BitOr {
  static_assert(std::is_integral_v<T>, "bitwise operators are for integers");
  static constexpr const char* kName = "bit_or";
  GPUSCAN_HD static T identity() { return T(0); }
  GPUSCAN_HD T operator()(T a, T b) const { return a | b; }
};

template <class T>
struct BitXor {
  static_assert(std::is_integral_v<T>, "bitwise operators are for integers");
  static constexpr const char* kName = "bit_xor";
  GPUSCAN_HD static T identity() { return T(0); }
  GPUSCAN_HD T operator()(T a, T b) const { return a ^ b; }
};

}  // namespace gpuscan::ops
