// ArrayInput and ArrayOutput beyond .npy: raw and text files, format detection from extensions
// and first bytes, and the errors a user sees for inputs that cannot work.
#include <gtest/gtest.h>

#include "array_files.h"
#include "npy.h"
#include "temp_dir.h"

namespace gpuscan::cli_test {
namespace {

using cli::ArrayInput;
using cli::Format;
using cli::InputSpec;

std::string OpenSpecError(const InputSpec& spec) {
  try {
    auto in = ArrayInput::Open(spec);
    ReadAllBytes(*in);
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

TEST(RawInput, LengthNotWholeElementsIsAnError) {
  TempDir dir;
  WriteFile(dir / "x.bin", std::string(10, '\1'));
  InputSpec spec;
  spec.path = dir / "x.bin";
  spec.dtype = v1::DTYPE_INT32;
  std::string err = OpenSpecError(spec);
  EXPECT_NE(err.find("10 bytes, not a multiple of the int32 element size (4)"), std::string::npos)
      << err;
  spec.dtype = v1::DTYPE_FLOAT64;
  EXPECT_NE(OpenSpecError(spec).find("float64 element size (8)"), std::string::npos);
}

TEST(RawInput, NeedsADtype) {
  TempDir dir;
  WriteFile(dir / "x.raw", std::string(8, '\0'));
  InputSpec spec;
  spec.path = dir / "x.raw";
  EXPECT_NE(OpenSpecError(spec).find("needs --dtype"), std::string::npos);
}

TEST(RawInput, RoundTripsAndKnowsItsCount) {
  TempDir dir;
  std::vector<uint64_t> v = {1, 2, 3, ~0ull};
  WriteArray(dir / "v.bin", v);
  EXPECT_EQ(ReadFile(dir / "v.bin").size(), 32u);  // no header
  InputSpec spec;
  spec.path = dir / "v.bin";
  spec.dtype = v1::DTYPE_UINT64;
  auto in = ArrayInput::Open(spec);
  EXPECT_EQ(in->format(), Format::kRaw);
  EXPECT_EQ(in->count(), 4u);
  EXPECT_EQ(ReadArray<uint64_t>(dir / "v.bin"), v);
}

TEST(TextInput, DefaultsToInt64AndRoundTrips) {
  TempDir dir;
  WriteFile(dir / "t.csv", "1,2,3\n-4,5,6\n");
  InputSpec spec;
  spec.path = dir / "t.csv";
  auto in = ArrayInput::Open(spec);
  EXPECT_EQ(in->format(), Format::kText);
  EXPECT_EQ(in->dtype(), v1::DTYPE_INT64);
  EXPECT_FALSE(in->count().has_value());  // unknown until parsed

  std::vector<float> f = {0.1f, -2.5f, 3e38f};
  WriteArray(dir / "f.txt", f);
  EXPECT_EQ(ReadFile(dir / "f.txt"), "0.1\n-2.5\n3e+38\n");
  EXPECT_EQ(ReadArray<float>(dir / "f.txt"), f);
}

TEST(Detection, ByFirstBytesWhenTheExtensionSaysNothing) {
  TempDir dir;
  std::vector<int32_t> v = {4, 5, 6};
  WriteArray(dir / "a.npy", v);
  WriteFile(dir / "npy_data", ReadFile(dir / "a.npy"));
  WriteFile(dir / "text_data", "4 5 6\n");
  WriteFile(dir / "binary_data", std::string("\x04\x00\x00\x00\xff\x00\x00\x00", 8));

  InputSpec spec;
  spec.path = dir / "npy_data";
  EXPECT_EQ(ArrayInput::Open(spec)->format(), Format::kNpy);
  spec.path = dir / "text_data";
  EXPECT_EQ(ArrayInput::Open(spec)->format(), Format::kText);
  spec.path = dir / "binary_data";
  EXPECT_NE(OpenSpecError(spec).find("cannot tell the input's format"), std::string::npos);
  spec.dtype = v1::DTYPE_INT32;
  EXPECT_EQ(ArrayInput::Open(spec)->format(), Format::kRaw);

  spec.path = dir / "a.npy";  // --format overrides the extension
  spec.format = Format::kRaw;
  auto raw = ArrayInput::Open(spec);
  EXPECT_EQ(raw->count(), (cli::kNpyHeaderBytes + 12) / 4);
}

TEST(Detection, DtypeThatContradictsTheNpyHeaderIsAnError) {
  TempDir dir;
  WriteArray(dir / "a.npy", std::vector<int32_t>{1});
  InputSpec spec;
  spec.path = dir / "a.npy";
  spec.dtype = v1::DTYPE_INT64;
  EXPECT_NE(OpenSpecError(spec).find("--dtype int64 conflicts"), std::string::npos);
}

TEST(Input, MissingFileNamesIt) {
  InputSpec spec;
  spec.path = "/nonexistent/dir/x.npy";
  EXPECT_NE(OpenSpecError(spec).find("cannot open /nonexistent/dir/x.npy"), std::string::npos);
}

TEST(Output, UnfinishedFileIsRemoved) {
  TempDir dir;
  cli::OutputSpec spec;
  spec.path = dir / "o.npy";
  {
    cli::ArrayOutput out(spec, v1::DTYPE_INT32, 3);
    int32_t x = 1;
    out.Write(&x, 4);
  }  // no Finish: the call failed
  EXPECT_FALSE(std::filesystem::exists(spec.path));
}

}  // namespace
}  // namespace gpuscan::cli_test
