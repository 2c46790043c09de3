// Text arrays: separators, tokens split across reads, bad tokens named with their line, range
// checks, and formatting that reads back to the same bits.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "gpuscan/client.h"
#include "names.h"
#include "text_format.h"

namespace gpuscan::cli_test {
namespace {

using cli::TextParser;

// Parses `text` as `dtype`, delivering it `step` characters per read.
template <class T>
std::vector<T> Parse(const std::string& text, size_t step = 1 << 16) {
  size_t pos = 0;
  TextParser p(DTypeOf<T>(), [&](char* buf, size_t n) {
    size_t k = std::min({n, step, text.size() - pos});
    std::memcpy(buf, text.data() + pos, k);
    pos += k;
    return k;
  }, "test.txt");
  std::vector<T> out;
  T buf[3];  // small reads: several Read calls per input
  while (size_t n = p.Read(buf, sizeof buf)) out.insert(out.end(), buf, buf + n / sizeof(T));
  return out;
}

template <class T>
std::string ParseError(const std::string& text) {
  try {
    Parse<T>(text);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

TEST(TextFormat, WhitespaceAndCommaSeparated) {
  const std::string text = "1 2\t3\n4,5, 6,,7\r\n  -8 +9\n\n";
  const std::vector<int32_t> want = {1, 2, 3, 4, 5, 6, 7, -8, 9};
  EXPECT_EQ(Parse<int32_t>(text), want);
  for (size_t step : {1, 2, 3, 7}) EXPECT_EQ(Parse<int32_t>(text, step), want) << step;
  EXPECT_TRUE(Parse<int64_t>("").empty());
  EXPECT_TRUE(Parse<int64_t>(" ,\n ").empty());
}

TEST(TextFormat, TokensSplitAcrossReadsStayWhole) {
  std::string text;
  std::vector<int64_t> want;
  for (int64_t i = 0; i < 5000; ++i) {
    want.push_back(i * 1234567891LL - 3000000000000LL);
    text += std::to_string(want.back()) + (i % 3 ? " " : ",\n");
  }
  EXPECT_EQ(Parse<int64_t>(text, 1), want);
  EXPECT_EQ(Parse<int64_t>(text, 4093), want);
  EXPECT_EQ(Parse<int64_t>(text), want);
}

TEST(TextFormat, BadTokenIsNamedWithItsLine) {
  std::string err = ParseError<int32_t>("1 2\n3 abc 4\n");
  EXPECT_NE(err.find("bad token 'abc'"), std::string::npos) << err;
  EXPECT_NE(err.find("line 2 of test.txt"), std::string::npos) << err;
  EXPECT_NE(err.find("int32"), std::string::npos) << err;

  err = ParseError<int64_t>("1\n2\n3.5\n");
  EXPECT_NE(err.find("'3.5'"), std::string::npos) << err;
  EXPECT_NE(err.find("line 3"), std::string::npos) << err;

  EXPECT_NE(ParseError<double>("1.0 2.0x").find("'2.0x'"), std::string::npos);
  EXPECT_NE(ParseError<int32_t>("1;2").find("'1;2'"), std::string::npos);
}

TEST(TextFormat, IntegersAreRangeChecked) {
  EXPECT_EQ(Parse<int32_t>("2147483647 -2147483648"),
            (std::vector<int32_t>{2147483647, -2147483647 - 1}));
  EXPECT_NE(ParseError<int32_t>("2147483648").find("'2147483648'"), std::string::npos);
  EXPECT_NE(ParseError<uint32_t>("-1").find("'-1'"), std::string::npos);
  EXPECT_EQ(Parse<uint64_t>("18446744073709551615"),
            (std::vector<uint64_t>{18446744073709551615ull}));
  EXPECT_NE(ParseError<uint64_t>("18446744073709551616").find("not a valid uint64"),
            std::string::npos);
}

TEST(TextFormat, FloatsIncludingSpecials) {
  auto v = Parse<double>("1.5e3, -0.25 inf -inf nan 1e-310");
  ASSERT_EQ(v.size(), 6u);
  EXPECT_EQ(v[0], 1500.0);
  EXPECT_EQ(v[1], -0.25);
  EXPECT_TRUE(std::isinf(v[2]) && v[2] > 0);
  EXPECT_TRUE(std::isinf(v[3]) && v[3] < 0);
  EXPECT_TRUE(std::isnan(v[4]));
  EXPECT_GT(v[5], 0.0);  // a denormal is a value, not an error
  EXPECT_EQ(Parse<float>("0.1"), std::vector<float>{0.1f});
  EXPECT_NE(ParseError<float>("1e39").find("'1e39'"), std::string::npos);  // beyond float
  EXPECT_NE(ParseError<double>("1e999").find("'1e999'"), std::string::npos);
}

template <class T>
void ExpectFormatRoundTrips(std::mt19937_64& rng) {
  for (int i = 0; i < 2000; ++i) {
    uint64_t bits = rng();
    T x;
    std::memcpy(&x, &bits, sizeof x);
    if constexpr (std::is_floating_point_v<T>) {
      if (std::isnan(x)) continue;  // NaN payloads print as plain "nan"
    }
    std::string s = cli::FormatElement(&x, DTypeOf<T>());
    T y;
    cli::ParseElement(s, DTypeOf<T>(), &y);
    EXPECT_EQ(std::memcmp(&x, &y, sizeof x), 0) << s;
  }
}

TEST(TextFormat, FormattedElementsReadBackBitExact) {
  std::mt19937_64 rng(std::random_device{}());
  ExpectFormatRoundTrips<int32_t>(rng);
  ExpectFormatRoundTrips<int64_t>(rng);
  ExpectFormatRoundTrips<uint32_t>(rng);
  ExpectFormatRoundTrips<uint64_t>(rng);
  ExpectFormatRoundTrips<float>(rng);
  ExpectFormatRoundTrips<double>(rng);
}

// A predicate's operand from the command line: a value that does not parse names its flag and
// the input's dtype (it said "bad token '1.5': not a valid int64 value").
TEST(TextFormat, AnOptionsScalarThatDoesNotParseNamesTheFlagAndTheDType) {
  EXPECT_EQ(cli::ParseScalar("-7", v1::DTYPE_INT8, "--threshold").int_value(), -7);
  EXPECT_EQ(cli::ParseScalar("7", v1::DTYPE_UINT32, "--upper").uint_value(), 7u);
  EXPECT_EQ(cli::ParseScalar("1.5", v1::DTYPE_FLOAT16, "--threshold").float_value(), 1.5);
  try {
    cli::ParseScalar("1.5", v1::DTYPE_INT32, "--threshold");
    ADD_FAILURE() << "1.5 parsed as an int32 threshold";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "--threshold '1.5': not an integer (the input is int32)");
  }
  EXPECT_THROW(cli::ParseScalar("x", v1::DTYPE_FLOAT64, "--upper"), std::invalid_argument);
}

}  // namespace
}  // namespace gpuscan::cli_test
