// Narrow inputs' conversions (service/narrow.h): float16 to float32 for every one of the 65536
// patterns and back, float32 to float16 against the compiler's own conversion (_Float16, round to
// nearest even) on every pattern near each half's rounding midpoints and on random ones, and the
// integer widenings as C casts them, on random data at odd alignments.
#include "service/narrow.h"

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include <gtest/gtest.h>

namespace gpuscan::server {
namespace {

float Bits(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}
uint32_t BitsOf(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

TEST(Narrow, EveryHalfWidensExactlyAndRoundsBackToItself) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = HalfToFloat(static_cast<uint16_t>(h));
    const bool nan = (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0;
    if (nan) {
      EXPECT_TRUE(std::isnan(f)) << h;
      EXPECT_EQ(FloatToHalf(f) & 0x7e00u, 0x7e00u) << h;  // a quiet NaN
      continue;
    }
#ifdef __FLT16_MAX__
    _Float16 half;
    const uint16_t h16 = static_cast<uint16_t>(h);
    std::memcpy(&half, &h16, 2);
    EXPECT_EQ(BitsOf(f), BitsOf(static_cast<float>(half))) << h;
#endif
    EXPECT_EQ(FloatToHalf(f), h) << h;
  }
}

#ifdef __FLT16_MAX__
uint16_t Reference(float f) {
  const _Float16 h = static_cast<_Float16>(f);
  uint16_t b;
  std::memcpy(&b, &h, 2);
  return b;
}

TEST(Narrow, FloatsRoundToNearestEvenAsTheCompilerDoes) {
  std::vector<uint32_t> patterns;
  for (uint32_t h = 0; h < 0x7c00u; ++h) {  // each half's value, and the floats around its midpoints
    const uint32_t b = BitsOf(HalfToFloat(static_cast<uint16_t>(h)));
    for (int64_t d : {-2, -1, 0, 1, 2}) {
      patterns.push_back(static_cast<uint32_t>(b + d));
      patterns.push_back(static_cast<uint32_t>(b + (1u << 12) + d));  // the midpoint to the next (normals)
    }
  }
  std::mt19937 rng(47);
  for (int i = 0; i < 2000000; ++i) patterns.push_back(rng());
  for (uint32_t b : {0x477fefffu, 0x477ff000u, 0x477ff001u, 0x7f7fffffu, 0x33000000u, 0x33000001u, 0x32ffffffu,
                     0x387fe000u, 0x387ff000u, 0x00000001u})
    patterns.push_back(b);
  size_t bad = 0;
  for (uint32_t b : patterns) {
    for (uint32_t s : {0u, 0x80000000u}) {
      const float f = Bits(b ^ s);
      if (std::isnan(f)) continue;
      if (FloatToHalf(f) != Reference(f) && ++bad < 10) {
        ADD_FAILURE() << std::hex << "float 0x" << (b ^ s) << ": 0x" << FloatToHalf(f) << " want 0x" << Reference(f);
      }
    }
  }
  EXPECT_EQ(bad, 0u);
}
#endif

TEST(Narrow, IntegersWidenAsCCastsThem) {
  std::mt19937_64 rng(7);
  const uint64_t n = 1001;
  std::vector<unsigned char> raw(2 * n + 1);
  for (auto& c : raw) c = static_cast<unsigned char>(rng());
  const unsigned char* src = raw.data() + 1;  // odd alignment
  std::vector<unsigned char> out(8 * n + 1);
  NarrowInput i16{v1::DTYPE_INT16, 2, false};
  Widen(i16, engine::DType::kInt64, src, out.data() + 1, n);
  NarrowInput u8{v1::DTYPE_UINT8, 1, false};
  std::vector<unsigned char> out2(4 * n);
  Widen(u8, engine::DType::kFloat32, src, out2.data(), n);
  NarrowInput i8{v1::DTYPE_INT8, 1, false};
  std::vector<unsigned char> out3(8 * n);
  Widen(i8, engine::DType::kUInt64, src, out3.data(), n);
  for (uint64_t i = 0; i < n; ++i) {
    int16_t a;
    std::memcpy(&a, src + 2 * i, 2);
    int64_t got;
    std::memcpy(&got, out.data() + 1 + 8 * i, 8);
    ASSERT_EQ(got, a) << i;
    float g2;
    std::memcpy(&g2, out2.data() + 4 * i, 4);
    ASSERT_EQ(g2, static_cast<float>(src[i])) << i;
    uint64_t g3;
    std::memcpy(&g3, out3.data() + 8 * i, 8);
    ASSERT_EQ(g3, static_cast<uint64_t>(static_cast<int8_t>(src[i]))) << i;
  }
}

// Compact, Sort and Histogram run a narrow array as its carrier and narrow the results back:
// every value of every narrow dtype goes there and back to the same bytes, in place too, and the
// carrier keeps their order (a sort of the carriers is a sort of the originals).
TEST(Narrow, CarriersHoldEveryValueAndKeepItsOrder) {
  std::mt19937_64 rng(11);
  for (const v1::DType wire : {v1::DTYPE_INT8, v1::DTYPE_UINT8, v1::DTYPE_INT16, v1::DTYPE_UINT16, v1::DTYPE_FLOAT16}) {
    const NarrowInput in{wire, NarrowSize(wire), false};
    const engine::DType carrier = Carrier(wire);
    ASSERT_EQ(engine::SizeOf(carrier), 4u) << NarrowName(wire);
    // Every bit pattern of the dtype, then a shuffled copy, from an odd address.
    const uint64_t n = uint64_t{1} << (8 * in.size);
    std::vector<unsigned char> raw(n * in.size + 1);
    for (uint64_t i = 0; i < n; ++i) std::memcpy(raw.data() + 1 + i * in.size, &i, in.size);
    std::vector<unsigned char> wide(n * 4);
    Widen(in, carrier, raw.data() + 1, wide.data(), n);
    std::vector<unsigned char> back(n * in.size);
    NarrowBack(in, carrier, wide.data(), back.data(), n);
    ASSERT_EQ(0, std::memcmp(back.data(), raw.data() + 1, back.size())) << NarrowName(wire);
    NarrowBack(in, carrier, wide.data(), wide.data(), n);  // in place, as the handlers do
    ASSERT_EQ(0, std::memcmp(wide.data(), raw.data() + 1, back.size())) << NarrowName(wire) << " in place";
    // Order: compare two random values as numbers of the narrow dtype and as carriers.
    for (int k = 0; k < 20000; ++k) {
      const uint64_t a = rng() % n, b = rng() % n;
      double x, y;
      if (wire == v1::DTYPE_FLOAT16) {
        x = HalfToFloat(static_cast<uint16_t>(a));
        y = HalfToFloat(static_cast<uint16_t>(b));
      } else if (wire == v1::DTYPE_INT8 || wire == v1::DTYPE_INT16) {
        x = wire == v1::DTYPE_INT8 ? static_cast<int8_t>(a) : static_cast<int16_t>(a);
        y = wire == v1::DTYPE_INT8 ? static_cast<int8_t>(b) : static_cast<int16_t>(b);
      } else {
        x = static_cast<double>(a);
        y = static_cast<double>(b);
      }
      unsigned char wa[4], wb[4];
      Widen(in, carrier, raw.data() + 1 + a * in.size, wa, 1);
      Widen(in, carrier, raw.data() + 1 + b * in.size, wb, 1);
      double cx, cy;
      if (carrier == engine::DType::kFloat32) {
        float f, g;
        std::memcpy(&f, wa, 4);
        std::memcpy(&g, wb, 4);
        cx = f, cy = g;
        ASSERT_EQ(std::signbit(f), (a & 0x8000) != 0) << a;  // -0 and negative NaNs keep their sign
      } else if (carrier == engine::DType::kInt32) {
        int32_t f, g;
        std::memcpy(&f, wa, 4);
        std::memcpy(&g, wb, 4);
        cx = f, cy = g;
      } else {
        uint32_t f, g;
        std::memcpy(&f, wa, 4);
        std::memcpy(&g, wb, 4);
        cx = f, cy = g;
      }
      if (std::isnan(x) || std::isnan(y)) {
        ASSERT_TRUE(std::isnan(cx) == std::isnan(x) && std::isnan(cy) == std::isnan(y)) << a << " " << b;
      } else {
        ASSERT_EQ(x < y, cx < cy) << NarrowName(wire) << " " << a << " " << b;
        ASSERT_EQ(x == y, cx == cy) << NarrowName(wire) << " " << a << " " << b;
      }
    }
  }
}

}  // namespace
}  // namespace gpuscan::server
