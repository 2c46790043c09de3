#include "service/shm_region.h"

#include <fcntl.h>
#include <signal.h>
#include <poll.h>
#include <sys/inotify.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>

namespace gpuscan::server::shm {
namespace {

// Live mappings, readable from the signal handler without locks: a fixed table of atomics.
// A slot is claimed by CAS on begin (0 = free). More live files than slots are still mapped but
// not covered, which only means a SIGBUS there crashes as it would without the net.
constexpr int kSlots = 1024;
std::atomic<std::uintptr_t> g_begin[kSlots];
std::atomic<std::uintptr_t> g_end[kSlots];
std::atomic<int> g_prot[kSlots];
std::atomic<bool> g_hit[kSlots];  // a touch past the file's end was caught in this mapping
std::uintptr_t g_page = 4096;

int Register(void* base, std::size_t length, int prot) {
  auto b = reinterpret_cast<std::uintptr_t>(base);
  for (int i = 0; i < kSlots; ++i) {
    std::uintptr_t expected = 0;  // a free slot's end is already 0 (Unregister clears it first)
    if (g_begin[i].compare_exchange_strong(expected, b)) {
      g_prot[i].store(prot);
      g_hit[i].store(false);
      g_end[i].store(b + length, std::memory_order_release);
      return i;
    }
  }
  return -1;
}

void Unregister(int slot) {
  g_end[slot].store(0, std::memory_order_release);
  g_begin[slot].store(0, std::memory_order_release);
}

struct sigaction g_previous;

void OnSigbus(int sig, siginfo_t* info, void* context) {
  const auto addr = reinterpret_cast<std::uintptr_t>(info->si_addr);
  for (int i = 0; i < kSlots; ++i) {
    const std::uintptr_t b = g_begin[i].load(std::memory_order_acquire);
    if (b == 0 || addr < b || addr >= g_end[i].load(std::memory_order_acquire)) continue;
    // Ours: a private zero page over the missing one lets the touch complete; the call sees
    // the mark and fails. mmap is a plain system call here (no locks, no allocation).
    void* page = reinterpret_cast<void*>(addr & ~(g_page - 1));
    if (mmap(page, g_page, g_prot[i].load(), MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) != MAP_FAILED) {
      g_hit[i].store(true);
      return;
    }
    break;
  }
  // Not ours (or the patch failed): behave as before the handler was installed.
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
    g_page = static_cast<std::uintptr_t>(sysconf(_SC_PAGESIZE));
    struct sigaction action {};
    action.sa_sigaction = OnSigbus;
    action.sa_flags = SA_SIGINFO;
    sigemptyset(&action.sa_mask);
    sigaction(SIGBUS, &action, &g_previous);
  });
}

grpc::Status Error(grpc::StatusCode code, const std::string& message) { return {code, message}; }

// Regions kept mapped besides those in use: bounds the descriptors and mappings the cache holds.
constexpr std::size_t kMaxCachedFiles = 64;

std::byte g_empty[8];  // data() of an empty file's view

}  // namespace

// One file, mapped whole (and maybe registered for DMA), shared by the cache and the calls using it.
class MappedFile {
 public:
  MappedFile(std::string name, int fd, const struct stat& st, bool writable)
      : name(std::move(name)), fd(fd), st(st), writable(writable) {}
  ~MappedFile() {
    pin.reset();  // unregister before unmapping
    if (slot >= 0) Unregister(slot);
    if (base != nullptr) munmap(base, length);
    close(fd);
  }
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  bool hit() const { return slot >= 0 && g_hit[slot].load(); }
  bool Same(const struct stat& other) const { return st.st_dev == other.st_dev && st.st_ino == other.st_ino; }
  // Not the change time: every write through any mapping (the client's, ours) updates it.
  // Resizes in between are caught by the directory watch (RegionDir::DrainChanges).
  bool Unchanged(const struct stat& other) const { return Same(other) && st.st_size == other.st_size; }
  std::byte* at(std::uint64_t offset) const {
    return base != nullptr ? static_cast<std::byte*>(base) + offset : g_empty;
  }

  const std::string name;  // the name it was opened by (directory events name files)
  const int fd;
  const struct stat st;
  std::atomic<std::uint64_t> changes{0};  // directory events for its name since it was mapped
  const bool writable;
  void* base = nullptr;
  std::size_t length = 0;
  int slot = -1;
  std::shared_ptr<void> pin;
  std::uint64_t pinned_bytes = 0;
};

bool RegionView::registered() const { return file_ && file_->pin != nullptr; }

bool RegionView::Overlaps(const RegionView& other) const {
  if (!file_ || !other.file_ || !file_->Same(other.file_->st) || bytes_ == 0 || other.bytes_ == 0) return false;
  return offset_ < other.offset_ + other.bytes_ && other.offset_ < offset_ + bytes_;
}

bool RegionView::SameRange(const RegionView& other) const {
  return file_ && other.file_ && file_->Same(other.file_->st) && offset_ == other.offset_ && bytes_ == other.bytes_;
}

grpc::Status RegionView::CheckIntact(const std::string& field) const {
  if (!file_) return grpc::Status::OK;
  if (dir_) dir_->DrainChanges();
  struct stat now {};
  if (file_->hit() || fstat(file_->fd, &now) != 0 || static_cast<std::uint64_t>(now.st_size) < offset_ + bytes_) {
    return ShrankStatus(field, name_);
  }
  if (file_->pin && file_->changes.load() != changes_) {
    // Resized (or written with write()) while registered pages were in use: a resize would
    // have left them detached from the file, so the results may not be in it.
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        field + " \"" + name_ + "\": region was resized or rewritten during the call");
  }
  return grpc::Status::OK;
}

RegionDir::RegionDir(int fd, std::string path, std::uint64_t pin_limit, Registrar registrar)
    : fd_(fd), path_(std::move(path)), pin_limit_(pin_limit), registrar_(std::move(registrar)) {
  if (fd_ < 0) return;
  // Size changes (truncate, including shrink-then-grow, which a size check misses), writes with
  // write(2), renames and deletions: a registered mapping's pages may no longer be the file's.
  // Writes through mappings raise no event: they change the file's pages in place.
  watch_ = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (watch_ >= 0 &&
      inotify_add_watch(watch_, path_.c_str(),
                        IN_MODIFY | IN_ATTRIB | IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO) < 0) {
    close(watch_);
    watch_ = -1;
  }
  if (watch_ >= 0) watcher_ = std::thread([this] { Watch(); });
}

// Drops cached files as soon as the directory says they changed or went, not at the next call's
// Map: a client that deletes its regions, or exits (its arena unlinked), gives their mappings
// and their DMA registration back at once (an arena region may be gigabytes, pinned).
void RegionDir::Watch() {
  struct pollfd p {};
  p.fd = watch_;
  p.events = POLLIN;
  while (!stop_.load()) {
    if (poll(&p, 1, 200) <= 0) continue;
    std::lock_guard<std::mutex> lock(mu_);
    DrainChangesLocked();
    EvictLocked();
  }
}

void RegionDir::DrainChanges() {
  std::lock_guard<std::mutex> lock(mu_);
  DrainChangesLocked();
}

void RegionDir::DrainChangesLocked() {
  if (watch_ < 0) {
    // No watch (inotify unavailable): nothing registered may be trusted across calls.
    for (auto& f : cache_) f->changes++;
    for (auto& f : cache_) pinned_ -= f->pinned_bytes;
    cache_.clear();
    return;
  }
  alignas(struct inotify_event) char buffer[16384];
  for (;;) {
    const ssize_t got = read(watch_, buffer, sizeof buffer);
    if (got <= 0) return;
    for (ssize_t at = 0; at < got;) {
      const auto* event = reinterpret_cast<const struct inotify_event*>(buffer + at);
      at += static_cast<ssize_t>(sizeof(struct inotify_event) + event->len);
      const bool all = (event->mask & IN_Q_OVERFLOW) != 0;
      const std::string name = event->len ? std::string(event->name) : std::string();
      for (auto it = cache_.begin(); it != cache_.end();) {
        if (all || (*it)->name == name) {
          (*it)->changes++;
          pinned_ -= (*it)->pinned_bytes;
          it = cache_.erase(it);
        } else {
          ++it;
        }
      }
    }
  }
}

std::unique_ptr<RegionDir> RegionDir::Open(const std::string& path, std::uint64_t pin_limit, Registrar registrar,
                                           std::string* error) {
  if (path.empty()) return Disabled();
  int fd = open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    *error = "--shm-dir " + path + ": " + std::strerror(errno);
    return nullptr;
  }
  InstallHandler();
  return std::unique_ptr<RegionDir>(new RegionDir(fd, path, pin_limit, std::move(registrar)));
}

std::unique_ptr<RegionDir> RegionDir::Disabled() {
  return std::unique_ptr<RegionDir>(new RegionDir(-1, "", 0, nullptr));
}

RegionDir::~RegionDir() {
  stop_ = true;
  if (watcher_.joinable()) watcher_.join();
  cache_.clear();
  if (watch_ >= 0) close(watch_);
  if (fd_ >= 0) close(fd_);
}

std::size_t RegionDir::cached_files() const {
  std::lock_guard<std::mutex> lock(mu_);
  return cache_.size();
}

std::uint64_t RegionDir::pinned_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return pinned_;
}

std::uint64_t RegionDir::maps() const {
  std::lock_guard<std::mutex> lock(mu_);
  return maps_;
}

// Drops what the cache should no longer hold: files changed or caught shrinking, files no
// longer linked (a client deleted its region: free its memory), and the least recently used
// idle ones beyond kMaxCachedFiles. Files in use by a call stay alive through its view.
void RegionDir::EvictLocked() {
  std::size_t idle_over = cache_.size() > kMaxCachedFiles ? cache_.size() - kMaxCachedFiles : 0;
  for (auto it = cache_.begin(); it != cache_.end();) {
    struct stat now {};
    const MappedFile& f = **it;
    const bool gone = f.hit() || fstat(f.fd, &now) != 0 || now.st_nlink == 0 || !f.Unchanged(now);
    const bool idle = it->use_count() == 1;
    if (gone || (idle && idle_over > 0)) {
      if (!gone) --idle_over;
      pinned_ -= f.pinned_bytes;
      it = cache_.erase(it);
    } else {
      ++it;
    }
  }
}

std::shared_ptr<MappedFile> RegionDir::Lookup(const std::string& name, int fd, const struct stat& st,
                                              bool writable, bool arena) {
  std::lock_guard<std::mutex> lock(mu_);
  DrainChangesLocked();
  EvictLocked();
  for (auto it = cache_.begin(); it != cache_.end(); ++it) {
    if ((*it)->name == name && (*it)->Unchanged(st) && (*it)->writable == writable) {
      std::shared_ptr<MappedFile> hit = *it;
      cache_.erase(it);
      cache_.push_back(hit);
      close(fd);
      if (!hit->pin) Pin(*hit);  // used again (or mapped while the pin limit was full)
      return hit;
    }
  }
  auto file = std::make_shared<MappedFile>(name, fd, st, writable);
  ++maps_;
  const auto size = static_cast<std::uint64_t>(st.st_size);
  if (size > 0) {
    const int prot = PROT_READ | (writable ? PROT_WRITE : 0);
    // An arena's pages are all faulted in now, in one pass (its arrays will touch them all).
    void* base = mmap(nullptr, size, prot, MAP_SHARED | (arena ? MAP_POPULATE : 0), fd, 0);
    if (base == MAP_FAILED) return nullptr;
    file->base = base;
    file->length = size;
    file->slot = Register(base, size, prot);
  }
  // Registered on its second use, not its first: registering costs about 0.4 s per GiB, more
  // than staging the copies of one call; a region used again pays it once. An arena says it
  // will be used again.
  cache_.push_back(file);
  if (arena) Pin(*file);
  return file;
}

// Registers the file for DMA when it fits under the pin limit, letting idle registered files
// go first (least recently used first). Unregistered files still work: their copies are staged.
void RegionDir::Pin(MappedFile& file) {
  const auto size = static_cast<std::uint64_t>(file.length);
  if (!registrar_ || size == 0 || size > pin_limit_) return;
  for (auto it = cache_.begin(); pinned_ + size > pin_limit_ && it != cache_.end();) {
    if (it->use_count() == 1 && (*it)->pinned_bytes > 0) {
      pinned_ -= (*it)->pinned_bytes;
      it = cache_.erase(it);
    } else {
      ++it;
    }
  }
  if (pinned_ + size > pin_limit_) return;
  file.pin = registrar_(file.base, size, !file.writable);
  if (file.pin) file.pinned_bytes = size;
  pinned_ += file.pinned_bytes;
}

grpc::Status RegionDir::Map(const std::string& field, const std::string& name, std::uint64_t offset,
                            std::uint64_t bytes, std::size_t element_size, bool writable, RegionView* out,
                            bool arena) {
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
  // Read-write when the server may (one cached mapping serves reads and writes), else read-only.
  constexpr int kFlags = O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK;
  bool rw = true;
  int fd = openat(fd_, name.c_str(), O_RDWR | kFlags);
  int err = fd < 0 ? errno : 0;
  if (fd < 0 && !writable && (err == EACCES || err == EPERM || err == EROFS)) {
    rw = false;
    fd = openat(fd_, name.c_str(), O_RDONLY | kFlags);
    err = fd < 0 ? errno : 0;
  }
  if (fd < 0) {
    if (err == ENOENT) return Error(grpc::StatusCode::NOT_FOUND, quoted + ": no such region under --shm-dir");
    if (err == EACCES || err == EPERM || err == EROFS) {
      return Error(grpc::StatusCode::PERMISSION_DENIED,
                   quoted + ": the server may not open it " + (writable ? "for writing" : "for reading"));
    }
    if (err == ELOOP) return Error(grpc::StatusCode::INVALID_ARGUMENT, quoted + ": is a symbolic link");
    if (err == EISDIR) return Error(grpc::StatusCode::INVALID_ARGUMENT, quoted + ": not a regular file");
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
  std::shared_ptr<MappedFile> file = Lookup(name, fd, st, rw, arena);  // owns fd from here
  if (!file) {
    return Error(grpc::StatusCode::RESOURCE_EXHAUSTED, quoted + ": cannot map: " + std::strerror(errno));
  }
  out->file_ = std::move(file);
  out->name_ = name;
  out->offset_ = offset;
  out->bytes_ = bytes;
  out->data_ = out->file_->at(offset);
  out->changes_ = out->file_->changes.load();
  out->dir_ = this;
  return grpc::Status::OK;
}

grpc::Status ShrankStatus(const std::string& field, const std::string& name) {
  return Error(grpc::StatusCode::FAILED_PRECONDITION,
               field + " \"" + name + "\": region shrank during the call (truncated while mapped)");
}

}  // namespace gpuscan::server::shm
