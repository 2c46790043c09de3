// Shared-memory regions for co-located clients (issue 10, part 2): the one place that opens,
// checks, maps and caches a client's region, and the SIGBUS net that turns a region shrinking
// under its mapping into a clear error instead of a crash. Owner/permission checks stay here.
//
// Safety model: a region is a regular file directly under the server's --shm-dir, opened with
// openat(dirfd, name, O_NOFOLLOW | O_CLOEXEC): no '/', no "..", no symlinks, so a caller can name
// only files that already live in that directory. Who may use a region is whoever may create
// files there and whose files the server's user may open: the directory's permissions are the
// access control (give it mode 1770 and a group shared by the server and its sidecars).
//
// Shrinking: a file truncated under a mapping raises SIGBUS on the next touch of a page past
// its end. The handler here maps a private zero page over the faulting page (so the touching
// thread, any thread, TBB workers included, goes on) and marks the file; the call then fails
// with ShrankStatus once its computation returns, and the mapping is dropped. The DMA path
// touches no page from the CPU; there the size is checked again after the call.
//
// Cache: mapping a file and registering it for DMA (cudaHostRegister) costs far more than a
// fast call, and clients reuse their regions, so the whole file's mapping and registration are
// kept between calls while the same file (name, device, inode and size) is still linked and no
// event on the directory (inotify: truncation, write(2), rename, deletion) touched its name. A
// cached entry holds the file open, so its inode number cannot be reused by another file. A
// region resized through a hard link under another name is not seen by the watch (only by the
// size checks): give each region one name.
#pragma once

#include <sys/stat.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/support/status.h>

namespace gpuscan::server::shm {

class MappedFile;
class RegionDir;

// What a region is registered with for DMA, e.g. engine::Engine::RegisterHost: returns a handle
// that keeps the registration while it lives, or nullptr (not registered: copies are staged).
using Registrar = std::function<std::shared_ptr<void>(void* data, std::uint64_t bytes, bool read_only)>;

// [offset, offset + bytes) of one region, for one call: keeps the file's mapping alive.
class RegionView {
 public:
  std::byte* data() const { return data_; }      // first byte of the range (valid also for 0 bytes)
  std::uint64_t bytes() const { return bytes_; }
  const std::string& name() const { return name_; }
  bool registered() const;  // the whole file is registered for DMA
  // Same file and overlapping ranges (both non-empty).
  bool Overlaps(const RegionView& other) const;
  bool SameRange(const RegionView& other) const;
  // After the call's computation: OK, or ShrankStatus when the file shrank below the range (a
  // touch past its end was caught, or its size is now smaller). `field` names the region.
  grpc::Status CheckIntact(const std::string& field) const;

 private:
  friend class RegionDir;
  std::shared_ptr<MappedFile> file_;
  std::string name_;
  std::uint64_t offset_ = 0;
  std::byte* data_ = nullptr;
  std::uint64_t bytes_ = 0;
  std::uint64_t changes_ = 0;  // the file's change count when mapped
  RegionDir* dir_ = nullptr;
};

// The --shm-dir, opened once. Disabled (every Map fails FAILED_PRECONDITION) when the path is
// empty. Thread-safe.
class RegionDir {
 public:
  // Fails (returns nullptr and sets *error) when the directory cannot be opened. A file is
  // registered for DMA from its second use on (the first call's copies are staged). pin_limit: the
  // most bytes of regions kept registered for DMA at once (least recently used ones are dropped
  // when idle; beyond it a region is used unregistered). registrar may be empty (no DMA).
  static std::unique_ptr<RegionDir> Open(const std::string& path, std::uint64_t pin_limit, Registrar registrar,
                                         std::string* error);
  static std::unique_ptr<RegionDir> Disabled();
  ~RegionDir();

  bool enabled() const { return fd_ >= 0; }
  const std::string& path() const { return path_; }

  // Opens `bytes` bytes at `offset` of region `name`. `field` names the request field in error
  // messages (e.g. "header.shared_memory.region"). element_size: offset and bytes must be
  // multiples of it. writable: results are written there (the mapping is MAP_SHARED, so they
  // land in the client's pages). Errors: FAILED_PRECONDITION (shared memory off), INVALID_ARGUMENT
  // (bad name, misaligned, not a regular file, a symlink), NOT_FOUND, PERMISSION_DENIED,
  // OUT_OF_RANGE (region smaller than offset + bytes), RESOURCE_EXHAUSTED (cannot map).
  // arena: the client's long-lived arena (SharedMemory.arena): a file not yet cached is mapped
  // populated and registered now instead of on its second use.
  grpc::Status Map(const std::string& field, const std::string& name, std::uint64_t offset, std::uint64_t bytes,
                   std::size_t element_size, bool writable, RegionView* out, bool arena = false);

  // Cache figures, for tests and logs.
  std::size_t cached_files() const;
  std::uint64_t pinned_bytes() const;
  std::uint64_t maps() const;  // files mapped so far (cache misses)

 private:
  RegionDir(int fd, std::string path, std::uint64_t pin_limit, Registrar registrar);
  friend class RegionView;
  std::shared_ptr<MappedFile> Lookup(const std::string& name, int fd, const struct stat& st, bool writable,
                                     bool arena);
  void Pin(MappedFile& file);
  void EvictLocked();
  void DrainChanges();
  void DrainChangesLocked();

  int fd_;
  void Watch();

  int watch_ = -1;  // inotify on the directory
  std::string path_;
  std::uint64_t pin_limit_;
  Registrar registrar_;
  mutable std::mutex mu_;
  std::atomic<bool> stop_{false};
  std::thread watcher_;  // Watch(), while there is a watch (last: it uses the members above)
  std::vector<std::shared_ptr<MappedFile>> cache_;  // most recently used last
  std::uint64_t pinned_ = 0;
  std::uint64_t maps_ = 0;
};

// The status for a region that shrank during the call.
grpc::Status ShrankStatus(const std::string& field, const std::string& name);

}  // namespace gpuscan::server::shm
