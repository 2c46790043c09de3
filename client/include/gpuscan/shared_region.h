// gpuscan::SharedRegion: an array in shared memory, for a client on the server's host. The
// server reads the input from the region and writes results into one (header.shared_memory):
// no array bytes cross gRPC. Create it in the directory the server was started with as
// --shm-dir (Client::Info().limits().shm_dir() says which, as the server sees it; a container
// may mount it elsewhere). See Client::ScanShared and the README's shared-memory section.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace gpuscan {

// A range of a region, what a shared-memory call names: the region's file name, the byte offset
// of the first element and the length, and where those bytes lie in this process. Spans do not
// own memory: SharedRegion::Span and SharedPiece::span (shared_arena.h) make them.
struct SharedSpan {
  std::string region;   // the file name under the server's --shm-dir
  uint64_t offset = 0;  // a multiple of the element size (a piece of an arena: of 4 KiB)
  size_t bytes = 0;
  void* data = nullptr;  // this process's address of byte `offset`
  bool arena = false;    // the region is an arena's: the server keeps it registered for DMA
  template <class T>
  T* as() const {
    return static_cast<T*>(data);
  }
  template <class T>
  size_t size() const {
    return bytes / sizeof(T);
  }
};

class SharedRegion {
 public:
  // A new region of `bytes` bytes (zero-filled) under `dir`, named "gpuscan-" + 32 random hex
  // digits, mode 0660 (the directory's group decides which servers and sidecars may use it),
  // mapped read-write. Throws std::system_error naming the path when it cannot be made.
  // populate: the file's pages are allocated now (a full filesystem fails here, not with SIGBUS
  // later) and faulted into this mapping (MAP_POPULATE), as an arena's regions are.
  static SharedRegion Create(const std::string& dir, size_t bytes, bool populate = false);
  SharedRegion() = default;
  ~SharedRegion();  // unmaps and deletes the file
  SharedRegion(SharedRegion&& other) noexcept;
  SharedRegion& operator=(SharedRegion&& other) noexcept;
  SharedRegion(const SharedRegion&) = delete;
  SharedRegion& operator=(const SharedRegion&) = delete;

  const std::string& name() const { return name_; }  // the file name, what headers carry
  const std::string& path() const { return path_; }
  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  // The range [offset, offset + bytes) of this region (bytes = the rest when left out).
  SharedSpan Span(size_t offset = 0, size_t bytes = SIZE_MAX) const;
  template <class T>
  T* as() const {
    return static_cast<T*>(data_);
  }
  template <class T>
  size_t size() const {
    return bytes_ / sizeof(T);
  }

 private:
  void Release();
  std::string name_, path_;
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace gpuscan
