// ArrayInput: opening, format detection and streaming reads of .npy, raw and text arrays.
#include "array_input.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "names.h"
#include "npy.h"
#include "text_format.h"

namespace gpuscan::cli {

// A FILE* (or stdin) with a peek buffer, so the format can be sniffed from the first bytes even
// when the input is a pipe.
class ArrayInput::Stream {
 public:
  explicit Stream(const std::string& path) : name_(path == "-" ? "stdin" : path) {
    if (path == "-") {
      f_ = stdin;
    } else {
      f_ = std::fopen(path.c_str(), "rb");
      if (!f_) throw std::runtime_error("cannot open " + path + ": " + std::strerror(errno));
      owned_ = true;
    }
    struct stat st;
    if (fstat(fileno(f_), &st) == 0 && S_ISREG(st.st_mode)) {
      size_ = static_cast<uint64_t>(st.st_size);
    }
  }
  ~Stream() {
    if (owned_) std::fclose(f_);
  }

  // Loops until n bytes or the end; throws on a read error.
  size_t Read(void* buf, size_t n) {
    auto* out = static_cast<char*>(buf);
    size_t got = std::min(n, peeked_.size() - peek_pos_);
    std::memcpy(out, peeked_.data() + peek_pos_, got);
    peek_pos_ += got;
    while (got < n) {
      size_t r = std::fread(out + got, 1, n - got, f_);
      if (r == 0) {
        if (std::ferror(f_)) {
          throw std::runtime_error("reading " + name_ + ": " + std::strerror(errno));
        }
        break;
      }
      got += r;
    }
    consumed_ += got;
    return got;
  }
  // Bytes Read has returned: the file offset of the next one.
  uint64_t consumed() const { return consumed_; }

  // The first up to n bytes, without consuming them (only before any Read).
  const std::string& Peek(size_t n) {
    size_t have = peeked_.size();
    if (have < n) {
      peeked_.resize(n);
      size_t got = have;
      while (got < n) {
        size_t r = std::fread(peeked_.data() + got, 1, n - got, f_);
        if (r == 0) break;
        got += r;
      }
      peeked_.resize(got);
    }
    return peeked_;
  }

  std::optional<uint64_t> size() const { return size_; }  // regular files only
  const std::string& name() const { return name_; }

 private:
  FILE* f_ = nullptr;
  bool owned_ = false;
  std::string name_;
  std::optional<uint64_t> size_;
  std::string peeked_;
  size_t peek_pos_ = 0;
  uint64_t consumed_ = 0;
};

class ArrayInput::Text {
 public:
  Text(v1::DType dtype, Stream& s)
      : parser(dtype, [&s](char* b, size_t n) { return s.Read(b, n); }, s.name()) {}
  TextParser parser;
};

ArrayInput::~ArrayInput() = default;

namespace {

bool LooksLikeNpy(const std::string& head) { return head.compare(0, 6, "\x93NUMPY") == 0; }

// Text if the first bytes are printable ASCII or whitespace (numbers, separators, nan, inf).
bool LooksLikeText(const std::string& head) {
  for (unsigned char c : head) {
    if (!(std::isprint(c) || std::isspace(c))) return false;
  }
  return true;
}

}  // namespace

std::unique_ptr<ArrayInput> ArrayInput::Open(const InputSpec& spec) {
  std::unique_ptr<ArrayInput> in(new ArrayInput);
  in->stream_ = std::make_unique<Stream>(spec.path);
  in->name_ = in->stream_->name();
  Stream& s = *in->stream_;
  if (spec.path != "-" && s.size()) {
    in->reopen_ = [spec] { return Open(spec); };
    in->path_ = spec.path;
  }

  Format format = spec.format;
  if (format == Format::kAuto && spec.path != "-") format = FormatFromPath(spec.path);
  if (format == Format::kAuto) {
    const std::string& head = s.Peek(512);
    if (LooksLikeNpy(head)) {
      format = Format::kNpy;
    } else if (LooksLikeText(head)) {
      format = Format::kText;
    } else if (spec.dtype) {
      format = Format::kRaw;
    } else {
      throw std::runtime_error(in->name_ + ": cannot tell the input's format; give --format " +
                               "npy|raw|text (and --dtype for raw)");
    }
  }
  in->format_ = format;

  switch (format) {
    case Format::kNpy: {
      NpyHeader h = ReadNpyHeader([&s](void* b, size_t n) { return s.Read(b, n); }, in->name_);
      v1::DType dtype;
      try {
        dtype = NpyDescrToDType(h.descr);
      } catch (const std::runtime_error& e) {
        throw std::runtime_error(in->name_ + ": " + e.what());
      }
      if (spec.dtype && *spec.dtype != dtype) {
        throw std::runtime_error("--dtype " + DTypeName(*spec.dtype) + " conflicts with " +
                                 in->name_ + ", which holds " + DTypeName(dtype));
      }
      in->dtype_ = dtype;
      in->element_size_ = DTypeSize(dtype);
      in->count_ = h.count();
      in->shape_ = h.shape;
      in->remaining_ = h.count() * in->element_size_;
      break;
    }
    case Format::kRaw: {
      if (!spec.dtype) throw std::runtime_error("raw input " + in->name_ + " needs --dtype");
      in->dtype_ = *spec.dtype;
      in->element_size_ = DTypeSize(in->dtype_);
      if (auto size = s.size()) {
        if (*size % in->element_size_ != 0) {
          throw std::runtime_error("raw input " + in->name_ + " is " + std::to_string(*size) +
                                   " bytes, not a multiple of the " + DTypeName(in->dtype_) +
                                   " element size (" + std::to_string(in->element_size_) + ")");
        }
        in->count_ = *size / in->element_size_;
      }
      break;
    }
    case Format::kText:
      in->dtype_ = spec.dtype.value_or(kDefaultTextDType);
      in->element_size_ = DTypeSize(in->dtype_);
      in->text_ = std::make_unique<Text>(in->dtype_, s);
      break;
    case Format::kAuto:
      break;
  }
  return in;
}

std::unique_ptr<ArrayInput> ArrayInput::OpenFlags(const std::string& path) {
  std::unique_ptr<ArrayInput> in(new ArrayInput);
  in->stream_ = std::make_unique<Stream>(path);
  in->name_ = in->stream_->name();
  Stream& s = *in->stream_;
  if (path != "-" && s.size()) {
    in->reopen_ = [path] { return OpenFlags(path); };
    in->path_ = path;
  }
  in->element_size_ = 1;
  if (LooksLikeNpy(s.Peek(6))) {
    in->format_ = Format::kNpy;
    NpyHeader h = ReadNpyHeader([&s](void* b, size_t n) { return s.Read(b, n); }, in->name_);
    if (!IsNpyFlagsDescr(h.descr)) {
      throw std::runtime_error("flags " + in->name_ + " must hold bool, uint8 or int8, not '" +
                               h.descr + "'");
    }
    in->count_ = h.count();
    in->remaining_ = h.count();
  } else {
    in->format_ = Format::kRaw;
    in->count_ = s.size();
  }
  return in;
}

std::optional<ArrayInput::FileSpan> ArrayInput::InFile() const {
  if (path_.empty() || text_ || !count_ || bytes_read_ != 0) return std::nullopt;
  const uint64_t start = stream_->consumed(), bytes = *count_ * element_size_;
  if (!stream_->size() || *stream_->size() < start + bytes) return std::nullopt;  // truncated: the stream says so
  return FileSpan{path_, start, bytes};
}

std::optional<SourceAt> ArrayInput::Positional() const {
  const std::optional<FileSpan> span = InFile();
  if (!span) return std::nullopt;
  const uint64_t start = span->offset, bytes = span->bytes;
  const int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  auto file = std::shared_ptr<int>(new int(fd), [](int* f) {
    ::close(*f);
    delete f;
  });
  return SourceAt(bytes, [file, start, name = name_](uint64_t offset, void* buf, size_t n) {
    auto* p = static_cast<char*>(buf);
    for (size_t done = 0; done < n;) {
      const ssize_t r = pread(*file, p + done, n - done, static_cast<off_t>(start + offset + done));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) {
        throw std::runtime_error("reading " + name + ": " + (r < 0 ? std::strerror(errno) : "the file shrank"));
      }
      done += static_cast<size_t>(r);
    }
  });
}

Replay ArrayInput::AsReplay() {
  if (!reopen_) return {};
  if (std::optional<SourceAt> at = Positional()) {
    return [at = *at]() -> Source { return at; };
  }
  return [this, first = true]() mutable -> Source {
    if (first) {
      first = false;
      return AsSource();
    }
    std::shared_ptr<ArrayInput> again = reopen_();
    return [again](void* b, size_t n) { return again->Read(b, n); };
  };
}

size_t ArrayInput::ReadBinary(void* buf, size_t max_bytes) {
  size_t want = max_bytes / element_size_ * element_size_;
  if (remaining_) want = std::min<uint64_t>(want, *remaining_);
  size_t got = stream_->Read(buf, want);
  if (remaining_) {
    *remaining_ -= got;
    if (got < want) {
      throw std::runtime_error(name_ + ": truncated .npy: the header promises " +
                               std::to_string(*count_) + " elements, the file holds " +
                               std::to_string((bytes_read_ + got) / element_size_));
    }
  } else if (got % element_size_ != 0) {
    throw std::runtime_error("raw input " + name_ + " is " + std::to_string(bytes_read_ + got) +
                             " bytes, not a multiple of the " + DTypeName(dtype_) +
                             " element size (" + std::to_string(element_size_) + ")");
  }
  return got;
}

size_t ArrayInput::Read(void* buf, size_t max_bytes) {
  size_t n = text_ ? text_->parser.Read(buf, max_bytes) : ReadBinary(buf, max_bytes);
  bytes_read_ += n;
  return n;
}

}  // namespace gpuscan::cli
