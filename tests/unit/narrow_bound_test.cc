// A predicate's bounds on a narrow array (validate.h NarrowBound, through ToEngine(CompactHeader)):
// integers must fit the narrow dtype itself, named in the refusal; a float16 array's bound is
// rounded to float16 once, correctly (against the compiler's double -> _Float16), where it fits.
#include <cmath>
#include <cstring>
#include <random>
#include <string>

#include <gtest/gtest.h>

#include "service/validate.h"

namespace gpuscan::server {
namespace narrow_bound_test {

v1::CompactHeader Header(v1::DType dtype, v1::PredicateOp op) {
  v1::CompactHeader h;
  h.set_dtype(dtype);
  h.mutable_predicate()->set_op(op);
  return h;
}

grpc::Status Check(const v1::CompactHeader& h, engine::CompactSpec* spec) {
  std::optional<NarrowInput> narrow;
  return ToEngine(h, spec, &narrow);
}

TEST(NarrowBound, IntegersMustFitTheNarrowDtypeNamedInTheRefusal) {
  struct Case {
    v1::DType dtype;
    int64_t value;
    bool fits;
    const char* name;
  };
  const Case cases[] = {
      {v1::DTYPE_INT8, 127, true, "int8"},     {v1::DTYPE_INT8, -128, true, "int8"},
      {v1::DTYPE_INT8, 300, false, "int8"},    {v1::DTYPE_INT8, -129, false, "int8"},
      {v1::DTYPE_UINT8, 255, true, "uint8"},   {v1::DTYPE_UINT8, 256, false, "uint8"},
      {v1::DTYPE_UINT8, -1, false, "uint8"},   {v1::DTYPE_INT16, 40000, false, "int16"},
      {v1::DTYPE_INT16, -32768, true, "int16"}, {v1::DTYPE_UINT16, 65535, true, "uint16"},
      {v1::DTYPE_UINT16, 65536, false, "uint16"},
  };
  for (const Case& c : cases) {
    v1::CompactHeader h = Header(c.dtype, v1::PREDICATE_OP_GT);
    h.mutable_predicate()->mutable_threshold()->set_int_value(c.value);
    engine::CompactSpec spec;
    const grpc::Status s = Check(h, &spec);
    const std::string what = std::string(c.name) + " " + std::to_string(c.value);
    if (c.fits) {
      ASSERT_TRUE(s.ok()) << what << ": " << s.error_message();
      int64_t carried = 0;
      if (c.name[0] == 'u') {
        uint32_t u;
        std::memcpy(&u, spec.predicate.threshold, 4);
        carried = u;
      } else {
        int32_t i;
        std::memcpy(&i, spec.predicate.threshold, 4);
        carried = i;
      }
      EXPECT_EQ(carried, c.value) << what;
    } else {
      EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << what;
      EXPECT_EQ(s.error_message(), "header.predicate.threshold=" + std::to_string(c.value) + " does not fit dtype " +
                                       c.name)
          << what;
    }
  }
  // IN_RANGE's upper bound alike.
  v1::CompactHeader h = Header(v1::DTYPE_UINT16, v1::PREDICATE_OP_IN_RANGE);
  h.mutable_predicate()->mutable_threshold()->set_uint_value(1);
  h.mutable_predicate()->mutable_upper()->set_uint_value(70000);
  engine::CompactSpec spec;
  EXPECT_EQ(Check(h, &spec).error_message(), "header.predicate.upper=70000 does not fit dtype uint16");
}

float Float16Bound(double v) {
  v1::CompactHeader h = Header(v1::DTYPE_FLOAT16, v1::PREDICATE_OP_GE);
  h.mutable_predicate()->mutable_threshold()->set_float_value(v);
  engine::CompactSpec spec;
  const grpc::Status s = Check(h, &spec);
  EXPECT_TRUE(s.ok()) << v << ": " << s.error_message();
  float f;
  std::memcpy(&f, spec.predicate.threshold, 4);
  return f;
}

TEST(NarrowBound, Float16BoundsRoundOnceToFloat16WhereTheyFit) {
  EXPECT_EQ(Float16Bound(0.1), HalfToFloat(0x2e66));  // 0.0999755859375, as numpy compares x >= 0.1
  EXPECT_EQ(Float16Bound(65504.0), 65504.0f);
  EXPECT_EQ(Float16Bound(65519.0), 65504.0f);            // still rounds to float16's largest
  EXPECT_EQ(Float16Bound(1e5), 1e5f);                    // beyond float16: compared wider, as numpy does
  EXPECT_TRUE(std::isinf(Float16Bound(-INFINITY)));
  EXPECT_TRUE(std::isnan(Float16Bound(NAN)));
#ifdef __FLT16_MAX__
  // Random doubles, and doubles a hair off each rounding midpoint of float16 (where rounding
  // through float32 first could round twice): one correct rounding, as the compiler's.
  std::mt19937_64 rng(56);
  std::uniform_real_distribution<double> any(-65504.0, 65504.0);
  for (int i = 0; i < 20000; ++i) {
    double v = any(rng);
    if (i % 2) {
      const uint16_t h = static_cast<uint16_t>(rng() % 0x7bff);
      const double mid = (double(HalfToFloat(h)) + double(HalfToFloat(h + 1))) / 2;
      v = std::nextafter(mid, (i % 4 == 1) ? 0.0 : 1e9) * ((i % 8 < 4) ? 1 : -1);
    }
    const float want = static_cast<float>(static_cast<_Float16>(v));
    EXPECT_EQ(Float16Bound(v), want) << std::hexfloat << v;
  }
#endif
}

}  // namespace narrow_bound_test
}  // namespace gpuscan::server
