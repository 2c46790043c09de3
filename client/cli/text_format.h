// Text arrays: numbers separated by whitespace and/or commas, parsed as a stream (no whole file
// in memory), and the element formatting used for text output and reports.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "gpuscan/v1/gpuscan.pb.h"

namespace gpuscan::cli {

// Parses one number as an element of `dtype` into *out (sizeof the dtype bytes). Integers in
// decimal with an optional sign, range-checked; floats as strtod reads them (nan, inf too).
// Throws std::invalid_argument naming the token.
void ParseElement(std::string_view token, v1::DType dtype, void* out);

// One element as text: integers exactly, floats in the shortest form that reads back to the
// same value.
std::string FormatElement(const void* element, v1::DType dtype);

// Streams elements out of text read through `read_chars` (fills up to n chars, 0 at the end).
class TextParser {
 public:
  using ReadChars = std::function<size_t(char* buf, size_t n)>;
  TextParser(v1::DType dtype, ReadChars read_chars, std::string name = "input");

  // Parses up to max_bytes / element size elements into buf; returns bytes written, 0 at the
  // end. Throws std::invalid_argument on a bad token ("bad token 'x' at line 3 of in.txt: ...").
  size_t Read(void* buf, size_t max_bytes);
  uint64_t elements() const { return elements_; }

 private:
  // Makes sure a whole token (or the end of input) lies in buf_ after pos_; false at the end.
  bool NextToken(std::string_view& token);

  v1::DType dtype_;
  size_t element_size_;
  ReadChars read_;
  std::string name_;
  std::string buf_;
  size_t pos_ = 0;
  bool eof_ = false;
  uint64_t line_ = 1;
  uint64_t elements_ = 0;
};

}  // namespace gpuscan::cli
