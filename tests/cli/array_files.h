// Test helpers: whole arrays to and from files through the CLI's own ArrayOutput/ArrayInput.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "array_input.h"
#include "array_output.h"

namespace gpuscan::cli_test {

// cols > 0: a matrix of rows of cols (a .npy gets a 2-D shape).
template <class T>
void WriteArray(const std::string& path, const std::vector<T>& v,
                cli::Format format = cli::Format::kAuto, uint64_t cols = 0) {
  cli::OutputSpec spec;
  spec.path = path;
  spec.format = format;
  cli::ArrayOutput out(spec, DTypeOf<T>(), v.size(), cols);
  out.Write(v.data(), v.size() * sizeof(T));
  out.Finish();
}

// n elements of a dtype without a C++ type of its own here (int8 ... float16), as raw bytes.
inline void WriteRawArray(const std::string& path, v1::DType dtype, const std::string& bytes, uint64_t n) {
  cli::OutputSpec spec;
  spec.path = path;
  cli::ArrayOutput out(spec, dtype, n);
  out.Write(bytes.data(), bytes.size());
  out.Finish();
}

// Reads every element, in small pieces so chunk boundaries get exercised.
inline std::string ReadAllBytes(cli::ArrayInput& in, size_t piece = 4096) {
  std::string all, buf(piece, '\0');
  while (size_t n = in.Read(buf.data(), buf.size())) all.append(buf.data(), n);
  return all;
}

// A .npy's shape.
inline std::vector<uint64_t> NpyShape(const std::string& path) {
  cli::InputSpec spec;
  spec.path = path;
  return cli::ArrayInput::Open(spec)->shape();
}

template <class T>
std::vector<T> ReadArray(const std::string& path, cli::Format format = cli::Format::kAuto) {
  cli::InputSpec spec;
  spec.path = path;
  spec.format = format;
  spec.dtype = DTypeOf<T>();
  auto in = cli::ArrayInput::Open(spec);
  EXPECT_EQ(in->dtype(), DTypeOf<T>());
  std::string bytes = ReadAllBytes(*in);
  std::vector<T> v(bytes.size() / sizeof(T));
  if (!v.empty()) std::memcpy(v.data(), bytes.data(), v.size() * sizeof(T));
  return v;
}

}  // namespace gpuscan::cli_test
