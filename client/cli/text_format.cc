// Text array parsing and element formatting.
#include "text_format.h"

#include "gpuscan/kernels/half.h"

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <type_traits>

#include "gpuscan/client.h"
#include "names.h"

namespace gpuscan::cli {
namespace {

constexpr size_t kReadBlock = 1 << 16;

bool IsSeparator(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == ',' || c == '\f' || c == '\v';
}

template <class T>
bool ParseInt(std::string_view t, T& v) {
  if (!t.empty() && t.front() == '+') t.remove_prefix(1);  // from_chars takes no '+'
  if (t.empty()) return false;
  auto r = std::from_chars(t.data(), t.data() + t.size(), v);
  return r.ec == std::errc() && r.ptr == t.data() + t.size();
}

bool ParseDouble(std::string_view t, double& v) {
  if (t.empty()) return false;
  std::string s(t);  // strtod needs a terminator
  char* end = nullptr;
  errno = 0;
  v = std::strtod(s.c_str(), &end);
  // Overflow to +-inf is an error; underflow to a denormal or zero is accepted.
  if (errno == ERANGE && std::isinf(v)) return false;
  return end == s.c_str() + s.size();
}

template <class T>
bool ParseTo(std::string_view t, void* out) {
  T v{};
  bool ok;
  if constexpr (std::is_integral_v<T>) {
    ok = ParseInt(t, v);
  } else {
    double d;
    ok = ParseDouble(t, d);
    // A finite double beyond float's range would become inf: refuse it like an int overflow.
    if (std::is_same_v<T, float> && std::isfinite(d) &&
        std::fabs(d) > std::numeric_limits<float>::max()) {
      ok = false;
    }
    v = static_cast<T>(d);
  }
  if (ok) std::memcpy(out, &v, sizeof v);
  return ok;
}

template <class T>
std::string Format(const void* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(v)) return "nan";
  }
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v);  // floats: shortest round-trip form
  return std::string(buf, r.ptr);
}

}  // namespace

void ParseElement(std::string_view token, v1::DType dtype, void* out) {
  bool ok = false;
  switch (dtype) {
    case v1::DTYPE_INT32: ok = ParseTo<int32_t>(token, out); break;
    case v1::DTYPE_INT64: ok = ParseTo<int64_t>(token, out); break;
    case v1::DTYPE_UINT32: ok = ParseTo<uint32_t>(token, out); break;
    case v1::DTYPE_UINT64: ok = ParseTo<uint64_t>(token, out); break;
    case v1::DTYPE_FLOAT32: ok = ParseTo<float>(token, out); break;
    case v1::DTYPE_FLOAT64: ok = ParseTo<double>(token, out); break;
    case v1::DTYPE_INT8: ok = ParseTo<int8_t>(token, out); break;
    case v1::DTYPE_UINT8: ok = ParseTo<uint8_t>(token, out); break;
    case v1::DTYPE_INT16: ok = ParseTo<int16_t>(token, out); break;
    case v1::DTYPE_UINT16: ok = ParseTo<uint16_t>(token, out); break;
    case v1::DTYPE_FLOAT16: {  // parsed as float32, rounded once
      float f;
      ok = ParseTo<float>(token, &f);
      const uint16_t h = half::FloatToHalf(f);
      std::memcpy(out, &h, 2);
      break;
    }
    default: throw std::invalid_argument("no dtype given for text input");
  }
  if (!ok) {
    throw std::invalid_argument("bad token '" + std::string(token) + "': not a valid " +
                                DTypeName(dtype) + " value");
  }
}

std::string FormatElement(const void* p, v1::DType dtype) {
  switch (dtype) {
    case v1::DTYPE_INT32: return Format<int32_t>(p);
    case v1::DTYPE_INT64: return Format<int64_t>(p);
    case v1::DTYPE_UINT32: return Format<uint32_t>(p);
    case v1::DTYPE_UINT64: return Format<uint64_t>(p);
    case v1::DTYPE_FLOAT32: return Format<float>(p);
    case v1::DTYPE_FLOAT64: return Format<double>(p);
    case v1::DTYPE_INT8: return Format<int8_t>(p);
    case v1::DTYPE_UINT8: return Format<uint8_t>(p);
    case v1::DTYPE_INT16: return Format<int16_t>(p);
    case v1::DTYPE_UINT16: return Format<uint16_t>(p);
    case v1::DTYPE_FLOAT16: {  // printed as the float32 of the same value
      uint16_t h;
      std::memcpy(&h, p, 2);
      const float f = half::HalfToFloat(h);
      return Format<float>(&f);
    }
    default: return "?";
  }
}

TextParser::TextParser(v1::DType dtype, ReadChars read_chars, std::string name)
    : dtype_(dtype),
      element_size_(DTypeSize(dtype)),
      read_(std::move(read_chars)),
      name_(std::move(name)) {
  if (element_size_ == 0) throw std::invalid_argument("text input needs a dtype");
}

bool TextParser::NextToken(std::string_view& token) {
  for (;;) {
    // Skip separators, counting lines for error messages.
    while (pos_ < buf_.size() && IsSeparator(buf_[pos_])) {
      if (buf_[pos_] == '\n') ++line_;
      ++pos_;
    }
    size_t end = pos_;
    while (end < buf_.size() && !IsSeparator(buf_[end])) ++end;
    if (end < buf_.size() || (eof_ && end > pos_)) {
      token = std::string_view(buf_).substr(pos_, end - pos_);
      pos_ = end;
      return true;
    }
    if (eof_) return false;
    // The token may continue past the buffer: keep its start and read more.
    buf_.erase(0, pos_);
    pos_ = 0;
    size_t old = buf_.size();
    buf_.resize(old + kReadBlock);
    size_t n = read_(buf_.data() + old, kReadBlock);
    buf_.resize(old + n);
    if (n == 0) eof_ = true;
  }
}

size_t TextParser::Read(void* buf, size_t max_bytes) {
  auto* out = static_cast<char*>(buf);
  size_t written = 0;
  std::string_view token;
  while (written + element_size_ <= max_bytes && NextToken(token)) {
    try {
      ParseElement(token, dtype_, out + written);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(std::string(e.what()) + " (line " + std::to_string(line_) +
                                  " of " + name_ + ")");
    }
    written += element_size_;
    ++elements_;
  }
  return written;
}

}  // namespace gpuscan::cli
