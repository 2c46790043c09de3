#include "gpuscan/shared_region.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <random>
#include <stdexcept>
#include <system_error>
#include <utility>

namespace gpuscan {
namespace {

std::string RandomName() {
  std::random_device rd;
  static const char kHex[] = "0123456789abcdef";
  std::string name = "gpuscan-";
  for (int i = 0; i < 8; ++i) {
    uint32_t v = rd();
    for (int j = 0; j < 4; ++j, v >>= 4) name += kHex[v & 15];
  }
  return name;
}

[[noreturn]] void Fail(const std::string& what, const std::string& path) {
  throw std::system_error(errno, std::generic_category(), what + " " + path);
}

}  // namespace

SharedRegion SharedRegion::Create(const std::string& dir, size_t bytes, bool populate) {
  SharedRegion r;
  r.name_ = RandomName();
  r.path_ = dir + "/" + r.name_;
  int fd = open(r.path_.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC | O_NOFOLLOW, 0660);
  if (fd < 0) Fail("cannot create shared-memory region", r.path_);
  r.bytes_ = bytes;  // from here ~SharedRegion deletes the file
  // posix_fallocate returns its error rather than setting errno.
  const int reserved = populate && bytes > 0 ? posix_fallocate(fd, 0, static_cast<off_t>(bytes)) : 0;
  if (reserved != 0) errno = reserved;
  if (reserved != 0 || fchmod(fd, 0660) != 0 || ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    const int err = errno;
    close(fd);
    errno = err;
    Fail("cannot size shared-memory region", r.path_);
  }
  if (bytes > 0) {
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | (populate ? MAP_POPULATE : 0), fd, 0);
    const int err = errno;
    close(fd);
    errno = err;
    if (p == MAP_FAILED) Fail("cannot map shared-memory region", r.path_);
    r.data_ = p;
  } else {
    close(fd);
  }
  return r;
}

SharedRegion::~SharedRegion() { Release(); }

SharedSpan SharedRegion::Span(size_t offset, size_t bytes) const {
  if (offset > bytes_ || (bytes != SIZE_MAX && bytes > bytes_ - offset)) {
    throw std::out_of_range("gpuscan: span [" + std::to_string(offset) + ", +" + std::to_string(bytes) +
                            ") outside the " + std::to_string(bytes_) + "-byte region " + name_);
  }
  SharedSpan s;
  s.region = name_;
  s.offset = offset;
  s.bytes = bytes == SIZE_MAX ? bytes_ - offset : bytes;
  s.data = data_ == nullptr ? nullptr : static_cast<char*>(data_) + offset;
  return s;
}

SharedRegion::SharedRegion(SharedRegion&& other) noexcept { *this = std::move(other); }

SharedRegion& SharedRegion::operator=(SharedRegion&& other) noexcept {
  if (this != &other) {
    Release();
    name_ = std::move(other.name_);
    path_ = std::move(other.path_);
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
    other.path_.clear();
  }
  return *this;
}

void SharedRegion::Release() {
  if (data_ != nullptr) munmap(data_, bytes_);
  if (!path_.empty()) unlink(path_.c_str());
  data_ = nullptr;
  path_.clear();
}

}  // namespace gpuscan
