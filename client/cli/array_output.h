// ArrayOutput: writes result elements to a file (or stdout) as they arrive, in .npy, raw or
// text form.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>

#include "formats.h"
#include "gpuscan/client.h"

namespace gpuscan::cli {

struct OutputSpec {
  std::string path = "-";         // "-" = stdout
  Format format = Format::kAuto;  // kAuto: by extension (.npy, .bin/.raw, else text); stdout: text
};

class ArrayOutput {
 public:
  // `expected_count`, when known, goes into a .npy header written up front. Otherwise (or if
  // the count turns out different) the header is rewritten at Finish on a regular file; on a
  // pipe the .npy payload is buffered in memory until Finish.
  // cols > 0: the elements are rows of `cols` (a .npy gets a 2-D shape).
  ArrayOutput(const OutputSpec& spec, v1::DType dtype, std::optional<uint64_t> expected_count, uint64_t cols = 0);
  // Without Finish (an error happened) a file this created is removed, not left half-written.
  ~ArrayOutput();
  ArrayOutput(const ArrayOutput&) = delete;
  ArrayOutput& operator=(const ArrayOutput&) = delete;

  // Appends result bytes (raw little-endian elements of the dtype); throws on a write error.
  void Write(const void* data, size_t bytes);
  // Result bytes [offset, offset + bytes) of the payload, written in place (pwrite): only where
  // positional(); safe from several threads at once for disjoint ranges.
  void WriteAt(uint64_t offset, const void* data, size_t bytes);
  // A regular file in .npy or raw form takes results by position (a SinkAt: striped lanes write
  // at once); anything else in order.
  bool positional() const { return seekable_ && (format_ == Format::kRaw || (format_ == Format::kNpy && header_count_)); }
  Sink AsSink();
  // For a writer that is not this process (a server writing a shared-memory region in place):
  // the payload's [0, bytes) made now (the file sized for them, counted as written); returns
  // the payload's first byte in the file. nullopt where !positional().
  std::optional<uint64_t> ReserveInPlace(uint64_t bytes);
  const std::string& path() const { return path_; }
  // Completes the file (header patch, flush, close); throws on an error.
  void Finish();

  Format format() const { return format_; }
  uint64_t elements() const { return std::max<uint64_t>(bytes_, end_.load()) / element_size_; }

 private:
  void Put(const void* data, size_t bytes);  // to the file, checked
  void StartPayload();  // positional: payload_start_ set, the header flushed

  std::string path_, name_;
  FILE* f_ = nullptr;
  bool owned_ = false, seekable_ = false, finished_ = false;
  Format format_;
  v1::DType dtype_;
  size_t element_size_;
  uint64_t cols_;                         // 0: a 1-D array
  std::optional<uint64_t> header_count_;  // the count in the .npy header written so far
  std::string buffered_;                  // .npy payload held back for a pipe
  std::string partial_;                   // text: bytes of an element split across writes
  uint64_t bytes_ = 0;
  int64_t payload_start_ = -1;        // positional: the file offset of the payload's first byte
  std::atomic<uint64_t> end_{0};      // positional: the furthest payload byte written
};

}  // namespace gpuscan::cli
