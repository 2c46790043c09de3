// Shared-memory regions for co-located clients (issue 10, part 2): the one place that opens,
// checks and maps a client's region, and the SIGBUS guard that turns a region shrinking under
// its mapping into a clear error instead of a crash. Owner/permission checks stay in this file.
//
// Safety model: a region is a regular file directly under the server's --shm-dir, opened with
// openat(dirfd, name, O_NOFOLLOW | O_CLOEXEC): no '/', no "..", no symlinks, so a caller can name
// only files that already live in that directory. Who may use a region is whoever may create
// files there and whose files the server's user may open: the directory's permissions are the
// access control (give it mode 1770 and a group shared by the server and its sidecars).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <grpcpp/support/status.h>

namespace gpuscan::server::shm {

// A mapping of [offset, offset + bytes) of one region; unmapped (and unregistered from the
// SIGBUS guard) on destruction.
class MappedRegion {
 public:
  ~MappedRegion();
  MappedRegion(const MappedRegion&) = delete;
  MappedRegion& operator=(const MappedRegion&) = delete;

  std::byte* data() const { return data_; }      // first byte of the requested range
  std::uint64_t bytes() const { return bytes_; }  // length of the requested range
  const std::string& name() const { return name_; }

 private:
  friend class RegionDir;
  MappedRegion(std::string name, void* base, std::size_t length, std::byte* data, std::uint64_t bytes);
  std::string name_;
  void* base_;          // page-aligned start of the mmap
  std::size_t length_;  // length of the mmap
  std::byte* data_;
  std::uint64_t bytes_;
};

// The --shm-dir, opened once. Disabled (every Open fails FAILED_PRECONDITION) when the path is
// empty.
class RegionDir {
 public:
  // Fails (returns nullptr and sets *error) when the directory cannot be opened.
  static std::unique_ptr<RegionDir> Open(const std::string& path, std::string* error);
  static std::unique_ptr<RegionDir> Disabled();
  ~RegionDir();

  bool enabled() const { return fd_ >= 0; }

  // Opens and maps `bytes` bytes at `offset` of region `name`. `field` names the request field
  // in error messages (e.g. "header.shared_memory.region"). element_size: offset and bytes must
  // be multiples of it. writable: the mapping is PROT_READ|PROT_WRITE and MAP_SHARED (results
  // land in the client's pages). Errors: FAILED_PRECONDITION (shared memory off),
  // INVALID_ARGUMENT (bad name, misaligned), NOT_FOUND, PERMISSION_DENIED, OUT_OF_RANGE (region
  // smaller than offset + bytes).
  grpc::Status Map(const std::string& field, const std::string& name, std::uint64_t offset,
                   std::uint64_t bytes, std::size_t element_size, bool writable,
                   std::unique_ptr<MappedRegion>* out) const;

 private:
  explicit RegionDir(int fd) : fd_(fd) {}
  int fd_;
};

// Runs body; a SIGBUS raised by this thread while inside it on an address of a live
// MappedRegion (the file was truncated under the mapping) ends body early and returns false.
// body must only touch memory (compute, memcpy, cudaHostRegister): it is left with siglongjmp,
// so it must not own objects whose destructors matter. Guards nest per thread; every thread
// that touches a mapping (TBB tasks included) runs its piece inside its own guard.
bool RunGuarded(const std::function<void()>& body);

// The status for a region that shrank during the call.
grpc::Status ShrankStatus(const std::string& field, const std::string& name);

}  // namespace gpuscan::server::shm
