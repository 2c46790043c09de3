// gpuscan::SharedArena: a client's shared-memory arena, the C++ counterpart of Python's
// Client.shared_array. A few regions are made once under the server's --shm-dir, their pages
// allocated and faulted in (SharedRegion::Create with populate); arrays are carved out of them
// (Carve) and go back when their SharedPiece is destroyed. A call on a piece's span says it is an
// arena's (SharedSpan::arena, sent as SharedMemory.arena): the server maps and registers the
// region for DMA on its first call and keeps it, so a fresh array costs no file, no mapping, no
// registration and no page faults on either side.
//
// A new region is made when no free run fits a piece. It holds `initial_bytes`, or else four
// times that piece (an input, its result and compaction's int64 indices), but at least as much as
// all regions before it and at least the piece. Pieces start on 4 KiB pages (any dtype's alignment). A region whose file someone else
// deleted is not carved from again. Regions live, and their files stay, while the arena or any
// piece of it does. Thread-safe.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "gpuscan/shared_region.h"

namespace gpuscan {

class SharedPiece;

class SharedArena {
 public:
  static constexpr size_t kAlign = 4096;
  // dir: where regions are made (the server's --shm-dir as this process sees it).
  explicit SharedArena(std::string dir, size_t initial_bytes = 0);
  ~SharedArena();
  SharedArena(const SharedArena&) = delete;
  SharedArena& operator=(const SharedArena&) = delete;

  // `bytes` bytes (a new region when no free piece fits; std::system_error when it cannot be
  // made). zero: the piece starts zeroed (a reused piece is cleared; pages never handed out are
  // zero already); false leaves a reused piece's old bytes, for outputs about to be written.
  SharedPiece Carve(size_t bytes, bool zero = true);
  template <class T>
  SharedPiece Carve(size_t n, bool zero = true);

  size_t bytes() const;       // bytes of the regions
  size_t free_bytes() const;  // bytes not carved out now
  std::vector<std::string> regions() const;  // the regions' file names

  struct State;

 private:
  std::shared_ptr<State> state_;
};

// A piece of an arena, move-only: its bytes go back to the arena when it is destroyed.
class SharedPiece {
 public:
  SharedPiece() = default;
  ~SharedPiece();
  SharedPiece(SharedPiece&& other) noexcept;
  SharedPiece& operator=(SharedPiece&& other) noexcept;
  SharedPiece(const SharedPiece&) = delete;
  SharedPiece& operator=(const SharedPiece&) = delete;

  const SharedSpan& span() const { return span_; }  // what calls take (arena set)
  void* data() const { return span_.data; }
  size_t bytes() const { return span_.bytes; }
  template <class T>
  T* as() const {
    return span_.as<T>();
  }
  template <class T>
  size_t size() const {
    return span_.size<T>();
  }

 private:
  friend class SharedArena;
  void Release();
  std::shared_ptr<SharedArena::State> state_;
  size_t region_ = 0;  // index in the arena's regions
  size_t size_ = 0;    // bytes taken from the region (bytes rounded up to kAlign)
  SharedSpan span_;
};

template <class T>
SharedPiece SharedArena::Carve(size_t n, bool zero) {
  return Carve(n * sizeof(T), zero);
}

}  // namespace gpuscan
