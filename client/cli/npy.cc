// .npy header reading and writing. The header dictionary is a Python literal; the small parser
// below accepts what numpy.save writes (and the quoting and spacing variants of it).
#include "npy.h"

#include <cctype>
#include <cstring>
#include <stdexcept>

namespace gpuscan::cli {
namespace {

const char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicLen = 6;

class DictParser {
 public:
  explicit DictParser(const std::string& s) : s_(s) {}

  NpyHeader Parse() {
    NpyHeader h;
    bool have_descr = false, have_order = false, have_shape = false;
    Expect('{');
    while (!Accept('}')) {
      std::string key = String();
      Expect(':');
      if (key == "descr") {
        Skip();
        if (Peek() != '\'' && Peek() != '"') {
          throw Error("structured or non-string descr is not supported");
        }
        h.descr = String();
        have_descr = true;
      } else if (key == "fortran_order") {
        h.fortran_order = Bool();
        have_order = true;
      } else if (key == "shape") {
        h.shape = Tuple();
        have_shape = true;
      } else {
        throw Error("unexpected key '" + key + "'");
      }
      if (!Accept(',')) {
        Expect('}');
        break;
      }
    }
    if (!have_descr || !have_order || !have_shape) {
      throw Error("header lacks one of 'descr', 'fortran_order', 'shape'");
    }
    return h;
  }

 private:
  std::runtime_error Error(const std::string& what) const {
    return std::runtime_error("malformed .npy header: " + what + " in " + s_);
  }
  void Skip() {
    while (p_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[p_]))) ++p_;
  }
  char Peek() const { return p_ < s_.size() ? s_[p_] : '\0'; }
  bool Accept(char c) {
    Skip();
    if (Peek() != c) return false;
    ++p_;
    return true;
  }
  void Expect(char c) {
    if (!Accept(c)) throw Error(std::string("expected '") + c + "'");
  }
  std::string String() {
    Skip();
    char q = Peek();
    if (q != '\'' && q != '"') throw Error("expected a string");
    size_t end = s_.find(q, p_ + 1);
    if (end == std::string::npos) throw Error("unterminated string");
    std::string v = s_.substr(p_ + 1, end - p_ - 1);
    p_ = end + 1;
    return v;
  }
  bool Bool() {
    Skip();
    if (s_.compare(p_, 4, "True") == 0) {
      p_ += 4;
      return true;
    }
    if (s_.compare(p_, 5, "False") == 0) {
      p_ += 5;
      return false;
    }
    throw Error("expected True or False");
  }
  std::vector<uint64_t> Tuple() {
    std::vector<uint64_t> v;
    Expect('(');
    while (!Accept(')')) {
      Skip();
      if (!std::isdigit(static_cast<unsigned char>(Peek()))) throw Error("expected a dimension");
      uint64_t d = 0;
      while (std::isdigit(static_cast<unsigned char>(Peek()))) d = d * 10 + (s_[p_++] - '0');
      if (Accept('L')) {}  // Python 2 longs
      v.push_back(d);
      if (!Accept(',')) {
        Expect(')');
        break;
      }
    }
    return v;
  }

  const std::string& s_;
  size_t p_ = 0;
};

void ReadExact(const std::function<size_t(void*, size_t)>& read, void* buf, size_t n,
               const std::string& name) {
  size_t got = 0;
  while (got < n) {
    size_t r = read(static_cast<char*>(buf) + got, n - got);
    if (r == 0) throw std::runtime_error(name + ": truncated .npy header");
    got += r;
  }
}

}  // namespace

uint64_t NpyHeader::count() const {
  uint64_t n = 1;
  for (uint64_t d : shape) n *= d;
  return n;
}

NpyHeader ParseNpyDict(const std::string& dict) { return DictParser(dict).Parse(); }

NpyHeader ReadNpyHeader(const std::function<size_t(void*, size_t)>& read,
                        const std::string& name) {
  unsigned char pre[kMagicLen + 2];
  ReadExact(read, pre, sizeof pre, name);
  if (std::memcmp(pre, kMagic, kMagicLen) != 0) {
    throw std::runtime_error(name + ": not a .npy file (bad magic)");
  }
  const int major = pre[6];
  size_t len_bytes;
  if (major == 1) {
    len_bytes = 2;
  } else if (major == 2 || major == 3) {
    len_bytes = 4;  // 3.0 differs from 2.0 only in allowing UTF-8 in the dictionary
  } else {
    throw std::runtime_error(name + ": unsupported .npy version " + std::to_string(major) + "." +
                             std::to_string(pre[7]));
  }
  unsigned char lb[4] = {};
  ReadExact(read, lb, len_bytes, name);
  size_t dict_len = lb[0] | lb[1] << 8 | size_t{lb[2]} << 16 | size_t{lb[3]} << 24;
  if (dict_len > (1u << 24)) throw std::runtime_error(name + ": .npy header too large");
  std::string dict(dict_len, '\0');
  ReadExact(read, dict.data(), dict_len, name);

  NpyHeader h;
  try {
    h = ParseNpyDict(dict);
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(name + ": " + e.what());
  }
  h.major_version = major;
  h.data_offset = sizeof pre + len_bytes + dict_len;
  // A 1-D array is the same in either order, but numpy only writes True for true 2-D+ Fortran
  // arrays, whose element order would be silently wrong here.
  if (h.fortran_order) {
    throw std::runtime_error(name + ": Fortran-order .npy arrays are not supported (save a " +
                             "C-order array, e.g. np.save(f, np.ascontiguousarray(a)))");
  }
  return h;
}

v1::DType NpyDescrToDType(const std::string& d) {
  if (d == "<i4") return v1::DTYPE_INT32;
  if (d == "<i8") return v1::DTYPE_INT64;
  if (d == "<u4") return v1::DTYPE_UINT32;
  if (d == "<u8") return v1::DTYPE_UINT64;
  if (d == "<f4") return v1::DTYPE_FLOAT32;
  if (d == "<f8") return v1::DTYPE_FLOAT64;
  // Narrow inputs (Scan and Reduce accumulate them in a wider --out-dtype); bool as uint8.
  if (d == "|i1" || d == "<i1") return v1::DTYPE_INT8;
  if (d == "|u1" || d == "<u1" || d == "|b1") return v1::DTYPE_UINT8;
  if (d == "<i2") return v1::DTYPE_INT16;
  if (d == "<u2") return v1::DTYPE_UINT16;
  if (d == "<f2") return v1::DTYPE_FLOAT16;
  if (!d.empty() && d[0] == '>') {
    throw std::runtime_error("big-endian .npy dtype '" + d + "' is not supported (convert " +
                             "with a.astype(a.dtype.newbyteorder('<')))");
  }
  throw std::runtime_error("unsupported .npy dtype '" + d +
                           "' (supported: <i4 <i8 <u4 <u8 <f4 <f8, i.e. int32 int64 uint32 "
                           "uint64 float32 float64; narrow ones too: |i1 |u1 |b1 <i2 <u2 <f2)");
}

bool IsNpyFlagsDescr(const std::string& d) {
  if (d.size() != 3 || d[2] != '1') return false;
  if (d[0] != '|' && d[0] != '<' && d[0] != '=' && d[0] != '>') return false;
  return d[1] == 'b' || d[1] == 'u' || d[1] == 'i';
}

std::string NpyDescr(v1::DType dtype) {
  switch (dtype) {
    case v1::DTYPE_INT32: return "<i4";
    case v1::DTYPE_INT64: return "<i8";
    case v1::DTYPE_UINT32: return "<u4";
    case v1::DTYPE_UINT64: return "<u8";
    case v1::DTYPE_FLOAT32: return "<f4";
    case v1::DTYPE_FLOAT64: return "<f8";
    case v1::DTYPE_INT8: return "|i1";
    case v1::DTYPE_UINT8: return "|u1";
    case v1::DTYPE_INT16: return "<i2";
    case v1::DTYPE_UINT16: return "<u2";
    case v1::DTYPE_FLOAT16: return "<f2";
    default: throw std::invalid_argument("no .npy descr for dtype " + std::to_string(dtype));
  }
}

std::string MakeNpyHeader(const std::string& descr, uint64_t count, uint64_t cols) {
  const std::string shape = cols ? std::to_string(count / cols) + ", " + std::to_string(cols) : std::to_string(count) + ",";
  std::string dict = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': (" + shape + "), }";
  // magic(6) + version(2) + length(2) + dict + spaces + '\n' = kNpyHeaderBytes (64-aligned,
  // as numpy writes it); the longest dict (two 20-digit dimensions) fits.
  const size_t dict_len = kNpyHeaderBytes - 10;
  dict.resize(dict_len - 1, ' ');
  dict.push_back('\n');
  std::string h(kMagic, kMagicLen);
  h.push_back('\x01');
  h.push_back('\x00');
  h.push_back(static_cast<char>(dict_len & 0xff));
  h.push_back(static_cast<char>(dict_len >> 8));
  return h + dict;
}

}  // namespace gpuscan::cli
