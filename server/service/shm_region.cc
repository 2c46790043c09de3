#include "service/shm_region.h"

#include <fcntl.h>
#include <signal.h>
#include <setjmp.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>

namespace gpuscan::server::shm {
namespace {

// Live mappings, readable from the signal handler without locks: a fixed table of atomics.
// A slot is claimed by CAS on begin (0 = free); more live regions than slots are still mapped but
// not guarded, which only means a SIGBUS there crashes as it would without the guard.
constexpr int kSlots = 1024;
std::atomic<std::uintptr_t> g_begin[kSlots];
std::atomic<std::uintptr_t> g_end[kSlots];

void Register(void* base, std::size_t length) {
  auto b = reinterpret_cast<std::uintptr_t>(base);
  for (int i = 0; i < kSlots; ++i) {
    std::uintptr_t expected = 0;  // a free slot's end is already 0 (Unregister clears it first)
    if (g_begin[i].compare_exchange_strong(expected, b)) {
      g_end[i].store(b + length, std::memory_order_release);
      return;
    }
  }
}

void Unregister(void* base) {
  auto b = reinterpret_cast<std::uintptr_t>(base);
  for (int i = 0; i < kSlots; ++i) {
    if (g_begin[i].load(std::memory_order_acquire) == b) {
      g_end[i].store(0, std::memory_order_release);
      g_begin[i].store(0, std::memory_order_release);
      return;
    }
  }
}

bool InRegion(std::uintptr_t addr) {
  for (int i = 0; i < kSlots; ++i) {
    std::uintptr_t b = g_begin[i].load(std::memory_order_acquire);
    if (b != 0 && addr >= b && addr < g_end[i].load(std::memory_order_acquire)) return true;
  }
  return false;
}

thread_local sigjmp_buf* t_guard = nullptr;
struct sigaction g_previous;

void OnSigbus(int sig, siginfo_t* info, void* context) {
  if (t_guard != nullptr && InRegion(reinterpret_cast<std::uintptr_t>(info->si_addr))) {
    siglongjmp(*t_guard, 1);
  }
  // Not ours: behave as before the guard was installed.
  if (g_previous.sa_flags & SA_SIGINFO) {
    if (g_previous.sa_sigaction != nullptr) return g_previous.sa_sigaction(sig, info, context);
  } else if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN) {
    return g_previous.sa_handler(sig);
  }
  signal(SIGBUS, SIG_DFL);
  raise(SIGBUS);
}

void InstallHandler() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction action {};
    action.sa_sigaction = OnSigbus;
    action.sa_flags = SA_SIGINFO | SA_NODEFER;  // NODEFER: siglongjmp leaves the handler
    sigemptyset(&action.sa_mask);
    sigaction(SIGBUS, &action, &g_previous);
  });
}

grpc::Status Error(grpc::StatusCode code, const std::string& message) { return {code, message}; }

}  // namespace

MappedRegion::MappedRegion(std::string name, void* base, std::size_t length, std::byte* data,
                           std::uint64_t bytes)
    : name_(std::move(name)), base_(base), length_(length), data_(data), bytes_(bytes) {}

MappedRegion::~MappedRegion() {
  if (base_ != nullptr) {
    Unregister(base_);
    munmap(base_, length_);
  }
}

std::unique_ptr<RegionDir> RegionDir::Open(const std::string& path, std::string* error) {
  if (path.empty()) return Disabled();
  int fd = open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    *error = "--shm-dir " + path + ": " + std::strerror(errno);
    return nullptr;
  }
  InstallHandler();
  return std::unique_ptr<RegionDir>(new RegionDir(fd));
}

std::unique_ptr<RegionDir> RegionDir::Disabled() { return std::unique_ptr<RegionDir>(new RegionDir(-1)); }

RegionDir::~RegionDir() {
  if (fd_ >= 0) close(fd_);
}

grpc::Status RegionDir::Map(const std::string& field, const std::string& name, std::uint64_t offset,
                            std::uint64_t bytes, std::size_t element_size, bool writable,
                            std::unique_ptr<MappedRegion>* out) const {
  const std::string quoted = field + " \"" + name + "\"";
  if (fd_ < 0) {
    return Error(grpc::StatusCode::FAILED_PRECONDITION,
                 quoted + ": shared memory is off on this server (start it with --shm-dir)");
  }
  // Only plain names directly under --shm-dir: no path, no parent, no hidden traversal.
  if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos ||
      name.find('\0') != std::string::npos) {
    return Error(grpc::StatusCode::INVALID_ARGUMENT,
                 quoted + ": a region is a plain file name under --shm-dir (no '/', not empty, not '..')");
  }
  if (element_size == 0 || offset % element_size != 0 || bytes % element_size != 0) {
    return Error(grpc::StatusCode::INVALID_ARGUMENT,
                 quoted + ": offset " + std::to_string(offset) + " and bytes " + std::to_string(bytes) +
                     " must be multiples of the element size " + std::to_string(element_size));
  }
  if (offset + bytes < offset) {
    return Error(grpc::StatusCode::OUT_OF_RANGE, quoted + ": offset + bytes overflows");
  }
  int fd = openat(fd_, name.c_str(), (writable ? O_RDWR : O_RDONLY) | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    int err = errno;
    if (err == ENOENT) return Error(grpc::StatusCode::NOT_FOUND, quoted + ": no such region under --shm-dir");
    if (err == EACCES || err == EPERM) {
      return Error(grpc::StatusCode::PERMISSION_DENIED,
                   quoted + ": the server may not open it " + (writable ? "for writing" : "for reading"));
    }
    if (err == ELOOP) return Error(grpc::StatusCode::INVALID_ARGUMENT, quoted + ": is a symbolic link");
    return Error(grpc::StatusCode::FAILED_PRECONDITION, quoted + ": cannot open: " + std::strerror(err));
  }
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return Error(grpc::StatusCode::INVALID_ARGUMENT, quoted + ": not a regular file");
  }
  const auto size = static_cast<std::uint64_t>(st.st_size);
  if (size < offset + bytes) {
    close(fd);
    return Error(grpc::StatusCode::OUT_OF_RANGE,
                 quoted + ": region has " + std::to_string(size) + " bytes, fewer than offset " +
                     std::to_string(offset) + " + bytes " + std::to_string(bytes));
  }
  const auto page = static_cast<std::uint64_t>(sysconf(_SC_PAGESIZE));
  const std::uint64_t start = offset / page * page;
  std::size_t length = static_cast<std::size_t>(offset + bytes - start);
  if (length == 0) length = 1;  // n = 0: map a byte so data() is valid; never touched
  void* base = nullptr;
  if (bytes > 0) {
    base = mmap(nullptr, length, PROT_READ | (writable ? PROT_WRITE : 0), MAP_SHARED, fd,
                static_cast<off_t>(start));
  } else {
    base = mmap(nullptr, length, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  }
  int err = errno;
  close(fd);  // the mapping keeps the file alive
  if (base == MAP_FAILED) {
    return Error(grpc::StatusCode::RESOURCE_EXHAUSTED, quoted + ": cannot map: " + std::strerror(err));
  }
  Register(base, length);
  out->reset(new MappedRegion(name, base, length, static_cast<std::byte*>(base) + (offset - start), bytes));
  return grpc::Status::OK;
}

bool RunGuarded(const std::function<void()>& body) {
  InstallHandler();
  sigjmp_buf buffer;
  sigjmp_buf* outer = t_guard;
  // savemask=1: the handler runs with SIGBUS possibly masked by the kernel; restore the mask.
  if (sigsetjmp(buffer, 1) != 0) {
    t_guard = outer;
    return false;
  }
  t_guard = &buffer;
  body();
  t_guard = outer;
  return true;
}

grpc::Status ShrankStatus(const std::string& field, const std::string& name) {
  return Error(grpc::StatusCode::FAILED_PRECONDITION,
               field + " \"" + name + "\": region shrank during the call (truncated while mapped)");
}

}  // namespace gpuscan::server::shm
