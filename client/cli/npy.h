// NumPy .npy format (versions 1.0, 2.0, 3.0): header parsing and writing. Only little-endian,
// C-order arrays of the six service dtypes (and 1-byte bool/int8/uint8 for compaction flags).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "gpuscan/v1/gpuscan.pb.h"

namespace gpuscan::cli {

struct NpyHeader {
  int major_version = 1;
  std::string descr;            // e.g. "<i4"
  bool fortran_order = false;
  std::vector<uint64_t> shape;  // () for a 0-d array
  size_t data_offset = 0;       // bytes from the file start to the first element

  uint64_t count() const;       // product of shape (1 for a 0-d array)
};

// Reads and parses a header through `read` (fills up to n bytes, returns bytes read, 0 at the
// end), consuming exactly the header's bytes. Throws std::runtime_error with a clear message on
// a bad magic, an unknown version, a malformed dictionary or Fortran order.
NpyHeader ReadNpyHeader(const std::function<size_t(void*, size_t)>& read,
                        const std::string& name = "input");

// The header's dictionary literal ("{'descr': '<i4', 'fortran_order': False, 'shape': (3,), }").
NpyHeader ParseNpyDict(const std::string& dict);

// The dtype of a data array's descr; throws std::runtime_error naming the descr otherwise
// (big-endian, other kinds, structured).
v1::DType NpyDescrToDType(const std::string& descr);
// True for the 1-byte descrs accepted as compaction flags: |b1, |u1, |i1 (and <, = forms).
bool IsNpyFlagsDescr(const std::string& descr);
std::string NpyDescr(v1::DType dtype);  // "<i4", ...

// A complete version 1.0 header for a 1-D array of `count` elements (with cols > 0: a 2-D
// array of count / cols rows of cols), always kNpyHeaderBytes long whatever the count, so it can
// be rewritten in place once the real count is known.
constexpr size_t kNpyHeaderBytes = 128;
std::string MakeNpyHeader(const std::string& descr, uint64_t count, uint64_t cols = 0);

}  // namespace gpuscan::cli
