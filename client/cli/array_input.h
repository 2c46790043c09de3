// ArrayInput: an array file (or stdin) read as a stream of raw little-endian elements, whatever
// its format (.npy, raw binary, text). Only a chunk at a time is in memory, so inputs of any
// size pass through to the service.
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "formats.h"
#include "gpuscan/client.h"

namespace gpuscan::cli {

struct InputSpec {
  std::string path = "-";          // "-" = stdin
  Format format = Format::kAuto;   // kAuto: by extension, else by the first bytes
  std::optional<v1::DType> dtype;  // required for raw; text defaults to int64; npy checks it
};

// The dtype text input gets without --dtype.
constexpr v1::DType kDefaultTextDType = v1::DTYPE_INT64;

class ArrayInput {
 public:
  // Opens and identifies the input; throws std::runtime_error with a message naming the file.
  static std::unique_ptr<ArrayInput> Open(const InputSpec& spec);
  // Compaction flags: a .npy of bool/uint8/int8 (by magic bytes) or else raw bytes, one per
  // element.
  static std::unique_ptr<ArrayInput> OpenFlags(const std::string& path);
  ~ArrayInput();

  v1::DType dtype() const { return dtype_; }  // DTYPE_UNSPECIFIED for flags
  size_t element_size() const { return element_size_; }
  Format format() const { return format_; }
  const std::string& name() const { return name_; }
  // Known before reading for .npy and raw regular files; not for text or raw stdin.
  std::optional<uint64_t> count() const { return count_; }
  // A .npy's shape (empty for other formats).
  const std::vector<uint64_t>& shape() const { return shape_; }
  std::optional<uint64_t> payload_bytes() const {
    if (!count_) return std::nullopt;
    return *count_ * element_size_;
  }

  // Fills up to max_bytes (whole elements) and returns the bytes written, 0 at the end. Throws
  // std::runtime_error on a truncated .npy, a raw length that is not whole elements, a bad text
  // token, or a read error.
  size_t Read(void* buf, size_t max_bytes);
  Source AsSource() {
    return [this](void* b, size_t n) { return Read(b, n); };
  }
  // The input as a Replay (for --retries): this input for the first try, the file opened again
  // for each retry. Empty for stdin and pipes, which can be read only once (calls on them are
  // not retried).
  // A regular .npy or raw file is read by position (a SourceAt, with pread: striped lanes read
  // at once, and a retry needs no reopening).
  Replay AsReplay();
  // The payload by position, where the input is a regular .npy or raw file that holds all of it.
  std::optional<SourceAt> Positional() const;
  // Where that payload lies: the file, its first byte and its length (what Positional reads).
  struct FileSpan {
    std::string path;
    uint64_t offset = 0;
    uint64_t bytes = 0;
  };
  std::optional<FileSpan> InFile() const;
  uint64_t bytes_read() const { return bytes_read_; }

 private:
  class Stream;
  class Text;
  ArrayInput() = default;
  size_t ReadBinary(void* buf, size_t max_bytes);

  std::function<std::unique_ptr<ArrayInput>()> reopen_;  // regular files only
  std::unique_ptr<Stream> stream_;
  std::unique_ptr<Text> text_;
  std::string name_;
  Format format_ = Format::kAuto;
  v1::DType dtype_ = v1::DTYPE_UNSPECIFIED;
  size_t element_size_ = 1;
  std::optional<uint64_t> count_;
  std::vector<uint64_t> shape_;
  std::optional<uint64_t> remaining_;  // payload bytes still to read, when known
  std::string path_;                   // regular files only
  uint64_t bytes_read_ = 0;
};

}  // namespace gpuscan::cli
