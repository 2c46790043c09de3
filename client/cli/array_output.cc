// ArrayOutput: streaming writes of result arrays as .npy, raw or text.
#include "array_output.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "npy.h"
#include "text_format.h"

namespace gpuscan::cli {

ArrayOutput::ArrayOutput(const OutputSpec& spec, v1::DType dtype,
                         std::optional<uint64_t> expected_count, uint64_t cols)
    : path_(spec.path), dtype_(dtype), element_size_(DTypeSize(dtype)), cols_(cols) {
  if (element_size_ == 0) throw std::invalid_argument("output needs a dtype");
  format_ = spec.format != Format::kAuto ? spec.format : FormatFromPath(spec.path);
  if (format_ == Format::kAuto) format_ = Format::kText;
  if (spec.path == "-") {
    f_ = stdout;
    name_ = "stdout";
  } else {
    f_ = std::fopen(spec.path.c_str(), "wb");
    if (!f_) throw std::runtime_error("cannot create " + spec.path + ": " + std::strerror(errno));
    owned_ = true;
    name_ = spec.path;
  }
  struct stat st;
  seekable_ = fstat(fileno(f_), &st) == 0 && S_ISREG(st.st_mode);
  if (format_ == Format::kNpy && (expected_count || seekable_)) {
    header_count_ = expected_count.value_or(0);  // a placeholder, patched at Finish
    std::string h = MakeNpyHeader(NpyDescr(dtype_), *header_count_, cols_);
    Put(h.data(), h.size());
  }
}

ArrayOutput::~ArrayOutput() {
  if (!owned_) return;
  std::fclose(f_);
  if (!finished_ && seekable_) std::remove(path_.c_str());
}

void ArrayOutput::Put(const void* data, size_t bytes) {
  if (bytes && std::fwrite(data, 1, bytes, f_) != bytes) {
    throw std::runtime_error("writing " + name_ + ": " + std::strerror(errno));
  }
}

void ArrayOutput::StartPayload() {
  if (payload_start_ >= 0) return;
  // What went through the FILE (the .npy header) must reach the file before pwrite.
  if (std::fflush(f_) != 0 || (payload_start_ = std::ftell(f_)) < 0) {
    throw std::runtime_error("writing " + name_ + ": " + std::strerror(errno));
  }
}

std::optional<uint64_t> ArrayOutput::ReserveInPlace(uint64_t bytes) {
  if (!positional()) return std::nullopt;
  StartPayload();
  if (::ftruncate(fileno(f_), static_cast<off_t>(payload_start_ + bytes)) != 0) {
    throw std::runtime_error("sizing " + name_ + ": " + std::strerror(errno));
  }
  uint64_t end = end_.load();
  while (bytes > end && !end_.compare_exchange_weak(end, bytes)) {
  }
  return static_cast<uint64_t>(payload_start_);
}

Sink ArrayOutput::AsSink() {
  if (!positional()) {
    return [this](const void* d, size_t n) { Write(d, n); };
  }
  StartPayload();
  return SinkAt([this](uint64_t offset, const void* d, size_t n) { WriteAt(offset, d, n); });
}

void ArrayOutput::WriteAt(uint64_t offset, const void* data, size_t bytes) {
  auto p = static_cast<const char*>(data);
  for (size_t done = 0; done < bytes;) {
    const ssize_t w = pwrite(fileno(f_), p + done, bytes - done, static_cast<off_t>(payload_start_ + offset + done));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) throw std::runtime_error("writing " + name_ + ": " + std::strerror(errno));
    done += static_cast<size_t>(w);
  }
  uint64_t end = end_.load(std::memory_order_relaxed);
  while (offset + bytes > end && !end_.compare_exchange_weak(end, offset + bytes, std::memory_order_relaxed)) {
  }
}

void ArrayOutput::Write(const void* data, size_t bytes) {
  bytes_ += bytes;
  if (format_ == Format::kRaw || (format_ == Format::kNpy && header_count_)) {
    Put(data, bytes);
  } else if (format_ == Format::kNpy) {
    buffered_.append(static_cast<const char*>(data), bytes);  // count unknown on a pipe
  } else {
    // Text: one element per line; an element split across writes waits in partial_.
    std::string text;
    auto p = static_cast<const char*>(data);
    size_t i = 0;
    if (!partial_.empty()) {
      size_t take = std::min(bytes, element_size_ - partial_.size());
      partial_.append(p, take);
      i = take;
      if (partial_.size() == element_size_) {
        text += FormatElement(partial_.data(), dtype_) + '\n';
        partial_.clear();
      }
    }
    for (; i + element_size_ <= bytes; i += element_size_) {
      text += FormatElement(p + i, dtype_);
      text += '\n';
    }
    if (i < bytes) partial_.append(p + i, bytes - i);
    Put(text.data(), text.size());
  }
}

void ArrayOutput::Finish() {
  if (payload_start_ >= 0) {
    // Written by position: the FILE's own position must follow the payload (the header patch
    // below seeks back and forth).
    bytes_ = std::max<uint64_t>(bytes_, end_.load());
    if (std::fseek(f_, static_cast<long>(payload_start_ + bytes_), SEEK_SET) != 0) {
      throw std::runtime_error("writing " + name_ + ": " + std::strerror(errno));
    }
  }
  if (bytes_ % element_size_ != 0) {
    throw std::runtime_error("result for " + name_ + " ended inside an element");
  }
  const uint64_t count = bytes_ / element_size_;
  if (format_ == Format::kNpy) {
    if (!header_count_) {
      std::string h = MakeNpyHeader(NpyDescr(dtype_), count, cols_);
      Put(h.data(), h.size());
      Put(buffered_.data(), buffered_.size());
      buffered_.clear();
    } else if (*header_count_ != count) {
      if (!seekable_) {
        throw std::runtime_error(name_ + ": received " + std::to_string(count) +
                                 " elements but the .npy header already written says " +
                                 std::to_string(*header_count_));
      }
      std::string h = MakeNpyHeader(NpyDescr(dtype_), count, cols_);
      if (std::fflush(f_) != 0 || std::fseek(f_, 0, SEEK_SET) != 0) {
        throw std::runtime_error("rewriting the header of " + name_ + ": " +
                                 std::strerror(errno));
      }
      Put(h.data(), h.size());
      std::fseek(f_, 0, SEEK_END);
    }
  }
  if (std::fflush(f_) != 0) {
    throw std::runtime_error("writing " + name_ + ": " + std::strerror(errno));
  }
  if (owned_) {
    int rc = std::fclose(f_);
    owned_ = false;
    if (rc != 0) throw std::runtime_error("closing " + name_ + ": " + std::strerror(errno));
  }
  finished_ = true;
}

}  // namespace gpuscan::cli
