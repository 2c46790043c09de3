// .npy reading and writing: round trips for every dtype, headers as numpy writes them (v1, v2,
// v3, any shape), and clear rejections of what the service cannot take.
#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <random>

#include "array_files.h"
#include "npy.h"
#include "temp_dir.h"

namespace gpuscan::cli_test {
namespace {

using cli::ArrayInput;
using cli::InputSpec;

// A header exactly as numpy.save lays it out: the dict, spaces, '\n', total a multiple of 64.
std::string NumpyHeader(int major, const std::string& dict) {
  const size_t prefix = major == 1 ? 10 : 12;
  std::string d = dict;
  size_t pad = (64 - (prefix + d.size() + 1) % 64) % 64;
  d += std::string(pad, ' ') + "\n";
  std::string h = "\x93NUMPY";
  h.push_back(static_cast<char>(major));
  h.push_back('\0');
  for (size_t i = 0; i < (major == 1 ? 2u : 4u); ++i) {
    h.push_back(static_cast<char>(d.size() >> (8 * i)));
  }
  return h + d;
}

template <class T>
std::string Bytes(const std::vector<T>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

template <class T>
class NpyRoundTrip : public ::testing::Test {};
using AllTypes = ::testing::Types<int32_t, int64_t, uint32_t, uint64_t, float, double>;
TYPED_TEST_SUITE(NpyRoundTrip, AllTypes);

TYPED_TEST(NpyRoundTrip, EveryValueComesBackBitExact) {
  using T = TypeParam;
  std::mt19937_64 rng(std::random_device{}());
  std::vector<T> v(10007);
  for (auto& x : v) {
    uint64_t bits = rng();
    std::memcpy(&x, &bits, sizeof(T));  // any bit pattern, NaNs included
  }
  v[0] = std::numeric_limits<T>::lowest();
  v[1] = std::numeric_limits<T>::max();
  TempDir dir;
  const std::string path = dir / "a.npy";
  WriteArray(path, v);

  const std::string file = ReadFile(path);
  ASSERT_EQ(file.size(), cli::kNpyHeaderBytes + v.size() * sizeof(T));
  EXPECT_EQ(file.compare(0, 8, std::string("\x93NUMPY\x01\x00", 8)), 0);
  EXPECT_EQ(cli::kNpyHeaderBytes % 64, 0u);
  EXPECT_EQ(file[cli::kNpyHeaderBytes - 1], '\n');
  EXPECT_NE(file.find("'descr': '" + cli::NpyDescr(DTypeOf<T>()) + "'"), std::string::npos);
  EXPECT_NE(file.find("'shape': (10007,)"), std::string::npos);

  InputSpec spec;
  spec.path = path;
  auto in = ArrayInput::Open(spec);  // no --dtype: the header gives it
  EXPECT_EQ(in->dtype(), DTypeOf<T>());
  ASSERT_EQ(in->count(), v.size());
  EXPECT_EQ(ReadAllBytes(*in), Bytes(v));
}

TYPED_TEST(NpyRoundTrip, UnknownCountIsPatchedIntoTheHeader) {
  using T = TypeParam;
  std::vector<T> v = {T(1), T(2), T(3), T(4), T(5)};
  TempDir dir;
  cli::OutputSpec spec;
  spec.path = dir / "kept.npy";
  {
    cli::ArrayOutput out(spec, DTypeOf<T>(), std::nullopt);
    out.Write(v.data(), 2 * sizeof(T));  // in pieces, as results arrive
    out.Write(v.data() + 2, 3 * sizeof(T));
    out.Finish();
  }
  EXPECT_EQ(ReadArray<T>(spec.path), v);
}

TEST(Npy, ParsesNumpyV1HeaderWithAnyShape) {
  TempDir dir;
  std::vector<double> v = {1.5, -2, 3, 4, 5, 6};
  WriteFile(dir / "m.npy",
            NumpyHeader(1, "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), }") +
                Bytes(v));
  InputSpec spec;
  spec.path = dir / "m.npy";
  auto in = ArrayInput::Open(spec);
  EXPECT_EQ(in->dtype(), v1::DTYPE_FLOAT64);
  EXPECT_EQ(in->count(), 6u);  // flattened
  EXPECT_EQ(ReadAllBytes(*in), Bytes(v));
}

TEST(Npy, ParsesV2AndV3Headers) {
  TempDir dir;
  std::vector<int32_t> v = {7, 8, 9};
  for (int major : {2, 3}) {
    const std::string path = dir / ("v" + std::to_string(major) + ".npy");
    WriteFile(path, NumpyHeader(major, "{\"descr\": \"<i4\", \"fortran_order\": False, "
                                       "\"shape\": (3,)}") + Bytes(v));
    EXPECT_EQ(ReadArray<int32_t>(path), v) << "version " << major;
  }
}

TEST(Npy, ZeroDimensionalArrayIsOneElement) {
  cli::NpyHeader h = cli::ParseNpyDict("{'descr': '<u8', 'fortran_order': False, 'shape': (), }");
  EXPECT_TRUE(h.shape.empty());
  EXPECT_EQ(h.count(), 1u);
  EXPECT_EQ(cli::ParseNpyDict("{'descr': '<u8', 'fortran_order': False, 'shape': (4, 0), }")
                .count(), 0u);
}

// Opens `header + payload` as .npy and returns the error message ("" when it opens).
std::string OpenError(const std::string& contents) {
  TempDir dir;
  WriteFile(dir / "x.npy", contents);
  InputSpec spec;
  spec.path = dir / "x.npy";
  try {
    auto in = ArrayInput::Open(spec);
    ReadAllBytes(*in);
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

TEST(Npy, RejectsFortranOrder) {
  std::string err = OpenError(
      NumpyHeader(1, "{'descr': '<i4', 'fortran_order': True, 'shape': (2, 2), }") +
      std::string(16, '\0'));
  EXPECT_NE(err.find("Fortran-order"), std::string::npos) << err;
  EXPECT_NE(err.find("x.npy"), std::string::npos) << err;
}

TEST(Npy, RejectsBigEndian) {
  std::string err = OpenError(
      NumpyHeader(1, "{'descr': '>i4', 'fortran_order': False, 'shape': (2,), }") +
      std::string(8, '\0'));
  EXPECT_NE(err.find("big-endian"), std::string::npos) << err;
  EXPECT_NE(err.find("'>i4'"), std::string::npos) << err;
}

TEST(Npy, RejectsOtherDtypesNamingThem) {
  for (const char* descr : {"<c8", "|S4", "<c16", "<M8[ns]"}) {  // narrow ones (|i1 ... <f2) are read: scan, reduce
    std::string err = OpenError(NumpyHeader(1, std::string("{'descr': '") + descr +
                                                   "', 'fortran_order': False, 'shape': (1,), }") +
                                std::string(16, '\0'));
    EXPECT_NE(err.find(std::string("unsupported .npy dtype '") + descr + "'"), std::string::npos)
        << err;
  }
  std::string err = OpenError(NumpyHeader(
      1, "{'descr': [('a', '<i4')], 'fortran_order': False, 'shape': (1,), }"));
  EXPECT_NE(err.find("structured"), std::string::npos) << err;
}

TEST(Npy, RejectsTruncatedFilesAndBadHeaders) {
  std::string err = OpenError(
      NumpyHeader(1, "{'descr': '<i8', 'fortran_order': False, 'shape': (4,), }") +
      std::string(20, '\0'));
  EXPECT_NE(err.find("truncated"), std::string::npos) << err;
  EXPECT_NE(err.find("promises 4 elements"), std::string::npos) << err;

  err = OpenError(std::string("\x93NUMPY\x01\x00\x50\x00{'descr'", 17));
  EXPECT_NE(err.find("truncated .npy header"), std::string::npos) << err;

  err = OpenError(NumpyHeader(1, "{'descr': '<i8', 'shape': (4,), }"));
  EXPECT_NE(err.find("malformed .npy header"), std::string::npos) << err;

  err = OpenError(std::string("\x93NUMPY\x04\x00", 8) + std::string(100, ' '));
  EXPECT_NE(err.find("unsupported .npy version 4.0"), std::string::npos) << err;

  TempDir dir;
  WriteFile(dir / "notnpy.npy", "hello world, not numpy");
  InputSpec spec;
  spec.path = dir / "notnpy.npy";
  try {
    ArrayInput::Open(spec);
    ADD_FAILURE() << "opened a non-npy file";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("bad magic"), std::string::npos) << e.what();
  }
}

TEST(Npy, FlagsAcceptBoolAndByteArraysOnly) {
  TempDir dir;
  WriteFile(dir / "f.npy",
            NumpyHeader(1, "{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }") +
                std::string("\x01\x00\x01", 3));
  auto flags = ArrayInput::OpenFlags(dir / "f.npy");
  EXPECT_EQ(flags->count(), 3u);
  EXPECT_EQ(ReadAllBytes(*flags), std::string("\x01\x00\x01", 3));

  WriteFile(dir / "g.npy",
            NumpyHeader(1, "{'descr': '<i4', 'fortran_order': False, 'shape': (1,), }") +
                std::string(4, '\0'));
  EXPECT_THROW(ArrayInput::OpenFlags(dir / "g.npy"), std::runtime_error);

  WriteFile(dir / "f.bin", std::string("\x00\x02\x00\x01", 4));  // raw: one byte per element
  auto raw = ArrayInput::OpenFlags(dir / "f.bin");
  EXPECT_EQ(raw->count(), 4u);
}

}  // namespace
}  // namespace gpuscan::cli_test
