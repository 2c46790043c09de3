// IEEE 754 binary16 (float16) <-> binary32, bit for bit as the hardware conversions do: float16
// widens exactly; float32 rounds to the nearest float16, ties to even (NaN stays a quiet NaN,
// beyond 65504 rounds to infinity). Host code, header-only: the server's narrow inputs
// (server/service/narrow.h) and the CLI's text output use it.
#pragma once

#include <cstdint>
#include <cstring>

namespace gpuscan::half {

inline float HalfToFloat(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);  // inf, NaN (payload kept)
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  } else if (mant == 0) {
    bits = sign;  // +-0
  } else {  // subnormal: normalize
    uint32_t e = 113, m = mant;
    while ((m & 0x400u) == 0) {
      m <<= 1;
      --e;
    }
    bits = sign | (e << 23) | ((m & 0x3ffu) << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

inline uint16_t FloatToHalf(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u) {  // inf or NaN (a NaN stays a quiet NaN)
    return static_cast<uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u | ((abs >> 13) & 0x3ffu) : 0));
  }
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds past 65504: inf
  if (abs >= 0x38800000u) {  // normal in half: 2^-14 and up
    const uint32_t rounded = abs + 0xfffu + ((abs >> 13) & 1u);  // round to nearest even at bit 13
    return static_cast<uint16_t>(sign | ((rounded - 0x38000000u) >> 13));
  }
  // Subnormal or zero in half: the value in units of 2^-24, rounded to nearest even.
  const uint32_t exp = abs >> 23;
  if (exp < 102) return sign;  // below half of 2^-24: +-0
  const uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
  const uint32_t shift = 126 - exp;  // mant * 2^(exp-150) / 2^-24 = mant >> (126 - exp)
  const uint32_t q = mant >> shift, rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
  const uint32_t r = q + (rem > half || (rem == half && (q & 1u)));
  return static_cast<uint16_t>(sign | r);
}

}  // namespace gpuscan::half
