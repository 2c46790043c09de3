// Sort keys as unsigned integers whose ascending order is the keys' order (issue 13), shared by
// the CPU engine and the CUDA kernels. Unsigned keys stay as they are; signed integers flip the
// sign bit; floats follow IEEE 754 total order (-NaN < -inf < ... < -0 < +0 < ... < +inf < +NaN):
// negatives flip every bit, the rest the sign bit. Descending complements the code, so a stable
// ascending sort of the codes is a stable descending sort of the keys (equal keys keep their
// input order either way). Host and device code.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "gpuscan/kernels/operators.h"

namespace gpuscan::sortkey {

template <class T>
using Code = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;

template <class T>
GPUSCAN_HD Code<T> Encode(T key, bool descending) {
  using U = Code<T>;
  constexpr U kSign = U(1) << (8 * sizeof(T) - 1);
  U u;
  memcpy(&u, &key, sizeof(T));
  if constexpr (std::is_floating_point_v<T>) {
    u = (u & kSign) ? U(~u) : U(u | kSign);
  } else if constexpr (std::is_signed_v<T>) {
    u ^= kSign;
  }
  return descending ? U(~u) : u;
}

template <class T>
GPUSCAN_HD T Decode(Code<T> u, bool descending) {
  using U = Code<T>;
  constexpr U kSign = U(1) << (8 * sizeof(T) - 1);
  if (descending) u = U(~u);
  if constexpr (std::is_floating_point_v<T>) {
    u = (u & kSign) ? U(u & ~kSign) : U(~u);
  } else if constexpr (std::is_signed_v<T>) {
    u ^= kSign;
  }
  T key;
  memcpy(&key, &u, sizeof(T));
  return key;
}

}  // namespace gpuscan::sortkey
