#include "service/narrow.h"

#include <cstring>

#include "engine/host_scan.h"

namespace gpuscan::server {
namespace {

using engine::host::Load;
using engine::host::Store;

template <class From, class To>
void Convert(const void* src, void* out, uint64_t n) {
  const auto* s = static_cast<const unsigned char*>(src);
  auto* o = static_cast<unsigned char*>(out);
  for (uint64_t i = 0; i < n; ++i) {
    Store(o, i, static_cast<To>(Load<From>(s, i)));
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
      Store(o, i, static_cast<double>(f));
    } else {
      Store(o, i, f);
    }
  }
}

template <class To>
void NarrowFrom(engine::DType from, const void* src, void* out, uint64_t n) {
  switch (from) {
    case engine::DType::kInt32: return Convert<int32_t, To>(src, out, n);
    case engine::DType::kUInt32: return Convert<uint32_t, To>(src, out, n);
    case engine::DType::kInt64: return Convert<int64_t, To>(src, out, n);
    case engine::DType::kUInt64: return Convert<uint64_t, To>(src, out, n);
    default: return;  // floats narrow to FLOAT16 only (RoundToHalf)
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
    Store(o, i, FloatToHalf(Load<float>(s, i)));
  }
}

std::string AccumulatedName(const std::optional<NarrowInput>& narrow, engine::DType engine) {
  const std::string wide(engine::Name(engine));
  if (!narrow) return wide;
  return std::string(NarrowName(narrow->wire)) + "->" + (narrow->half_out ? std::string("float16") : wide);
}

engine::DType Carrier(v1::DType wire) {
  switch (wire) {
    case v1::DTYPE_INT8:
    case v1::DTYPE_INT16: return engine::DType::kInt32;
    case v1::DTYPE_UINT8:
    case v1::DTYPE_UINT16: return engine::DType::kUInt32;
    default: return engine::DType::kFloat32;
  }
}

void NarrowBack(const NarrowInput& in, engine::DType engine, const void* src, void* out, uint64_t n) {
  switch (in.wire) {
    case v1::DTYPE_INT8: return NarrowFrom<int8_t>(engine, src, out, n);
    case v1::DTYPE_UINT8: return NarrowFrom<uint8_t>(engine, src, out, n);
    case v1::DTYPE_INT16: return NarrowFrom<int16_t>(engine, src, out, n);
    case v1::DTYPE_UINT16: return NarrowFrom<uint16_t>(engine, src, out, n);
    default: {  // exact: every value is a float16's; a NaN keeps its payload (a signaling one too)
      const auto* s = static_cast<const unsigned char*>(src);
      auto* o = static_cast<unsigned char*>(out);
      for (uint64_t i = 0; i < n; ++i) {
        const float f = Load<float>(s, i);
        uint32_t x;
        std::memcpy(&x, &f, 4);
        const bool nan = (x & 0x7fffffffu) > 0x7f800000u;
        Store(o, i, nan ? static_cast<uint16_t>(((x >> 16) & 0x8000u) | 0x7c00u | ((x >> 13) & 0x3ffu)) : FloatToHalf(f));
      }
      return;
    }
  }
}

}  // namespace gpuscan::server
