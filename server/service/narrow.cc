#include "service/narrow.h"

#include <cstring>

namespace gpuscan::server {
namespace {

template <class T>
T Load(const unsigned char* p, uint64_t i) {
  T v;
  std::memcpy(&v, p + i * sizeof(T), sizeof(T));
  return v;
}

template <class From, class To>
void Convert(const void* src, void* out, uint64_t n) {
  const auto* s = static_cast<const unsigned char*>(src);
  auto* o = static_cast<unsigned char*>(out);
  for (uint64_t i = 0; i < n; ++i) {
    const To v = static_cast<To>(Load<From>(s, i));
    std::memcpy(o + i * sizeof(To), &v, sizeof(To));
  }
}

template <class From>
void ConvertTo(engine::DType to, const void* src, void* out, uint64_t n) {
  switch (to) {
    case engine::DType::kInt32: return Convert<From, int32_t>(src, out, n);
    case engine::DType::kInt64: return Convert<From, int64_t>(src, out, n);
    case engine::DType::kUInt32: return Convert<From, uint32_t>(src, out, n);
    case engine::DType::kUInt64: return Convert<From, uint64_t>(src, out, n);
    case engine::DType::kFloat32: return Convert<From, float>(src, out, n);
    case engine::DType::kFloat64: return Convert<From, double>(src, out, n);
  }
}

// FLOAT16 elements as float32 (exact), then on to `to` (float64 exactly too).
void HalvesTo(engine::DType to, const void* src, void* out, uint64_t n) {
  const auto* s = static_cast<const unsigned char*>(src);
  auto* o = static_cast<unsigned char*>(out);
  for (uint64_t i = 0; i < n; ++i) {
    const float f = HalfToFloat(Load<uint16_t>(s, i));
    if (to == engine::DType::kFloat64) {
      const double d = f;
      std::memcpy(o + i * 8, &d, 8);
    } else {
      std::memcpy(o + i * 4, &f, 4);
    }
  }
}

}  // namespace

bool IsNarrow(int wire) { return wire >= v1::DTYPE_INT8 && wire <= v1::DTYPE_FLOAT16; }

size_t NarrowSize(v1::DType wire) { return wire == v1::DTYPE_INT8 || wire == v1::DTYPE_UINT8 ? 1 : 2; }

const char* NarrowName(v1::DType wire) {
  switch (wire) {
    case v1::DTYPE_INT8: return "int8";
    case v1::DTYPE_UINT8: return "uint8";
    case v1::DTYPE_INT16: return "int16";
    case v1::DTYPE_UINT16: return "uint16";
    default: return "float16";
  }
}

void Widen(const NarrowInput& in, engine::DType engine, const void* src, void* out, uint64_t n) {
  switch (in.wire) {
    case v1::DTYPE_INT8: return ConvertTo<int8_t>(engine, src, out, n);
    case v1::DTYPE_UINT8: return ConvertTo<uint8_t>(engine, src, out, n);
    case v1::DTYPE_INT16: return ConvertTo<int16_t>(engine, src, out, n);
    case v1::DTYPE_UINT16: return ConvertTo<uint16_t>(engine, src, out, n);
    default: return HalvesTo(engine, src, out, n);
  }
}

void RoundToHalf(const void* src, void* out, uint64_t n) {
  const auto* s = static_cast<const unsigned char*>(src);
  auto* o = static_cast<unsigned char*>(out);
  for (uint64_t i = 0; i < n; ++i) {
    const uint16_t h = FloatToHalf(Load<float>(s, i));
    std::memcpy(o + i * 2, &h, 2);
  }
}

float HalfToFloat(uint16_t h) {
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

uint16_t FloatToHalf(float f) {
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

}  // namespace gpuscan::server
