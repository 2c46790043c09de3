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

class SharedRegion {
 public:
  // A new region of `bytes` bytes (zero-filled) under `dir`, named "gpuscan-" + 32 random hex
  // digits, mode 0660 (the directory's group decides which servers and sidecars may use it),
  // mapped read-write. Throws std::system_error naming the path when it cannot be made.
  static SharedRegion Create(const std::string& dir, size_t bytes);
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
