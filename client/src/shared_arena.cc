#include "gpuscan/shared_arena.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <iterator>
#include <map>
#include <mutex>
#include <utility>

namespace gpuscan {

// One region and its free runs (offset -> size, merged).
struct ArenaRegion {
  SharedRegion region;
  std::map<size_t, size_t> free;
  size_t touched = 0;   // bytes from the start ever handed out: beyond them the file is still zero
  bool usable = true;   // false once its file is found deleted (calls on it would fail)

  explicit ArenaRegion(SharedRegion r) : region(std::move(r)) { free.emplace(0, region.bytes()); }

  // First fit: the offset, and how many of the piece's first bytes were handed out before.
  bool Take(size_t size, size_t* offset, size_t* dirty) {
    for (auto it = free.begin(); it != free.end(); ++it) {
      if (it->second < size) continue;
      *offset = it->first;
      const size_t left = it->second - size;
      free.erase(it);
      if (left > 0) free.emplace(*offset + size, left);
      *dirty = touched > *offset ? std::min(touched, *offset + size) - *offset : 0;
      touched = std::max(touched, *offset + size);
      return true;
    }
    return false;
  }

  void Give(size_t offset, size_t size) {
    auto it = free.emplace(offset, size).first;
    auto next = std::next(it);
    if (next != free.end() && offset + size == next->first) {  // merge with the next run
      it->second += next->second;
      free.erase(next);
    }
    if (it != free.begin()) {  // and with the previous
      auto prev = std::prev(it);
      if (prev->first + prev->second == offset) {
        prev->second += it->second;
        free.erase(it);
      }
    }
  }

  bool StillThere() {
    if (usable && access(region.path().c_str(), F_OK) != 0) usable = false;
    return usable;
  }
};

struct SharedArena::State {
  std::string dir;
  size_t initial_bytes;
  mutable std::mutex mu;
  std::vector<std::unique_ptr<ArenaRegion>> regions;

  size_t Bytes() const {
    size_t total = 0;
    for (const auto& r : regions) total += r->region.bytes();
    return total;
  }
};

SharedArena::SharedArena(std::string dir, size_t initial_bytes) : state_(std::make_shared<State>()) {
  state_->dir = std::move(dir);
  state_->initial_bytes = initial_bytes;
}

SharedArena::~SharedArena() = default;  // the regions go with the last piece

SharedPiece SharedArena::Carve(size_t bytes, bool zero) {
  const size_t size = std::max(kAlign, (bytes + kAlign - 1) / kAlign * kAlign);
  SharedPiece piece;
  size_t offset = 0, dirty = 0;
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    ArenaRegion* region = nullptr;
    for (size_t i = 0; i < state_->regions.size() && region == nullptr; ++i) {
      ArenaRegion* r = state_->regions[i].get();
      if (r->StillThere() && r->Take(size, &offset, &dirty)) {
        region = r;
        piece.region_ = i;
      }
    }
    if (region == nullptr) {
      const size_t want = state_->initial_bytes ? state_->initial_bytes : 4 * size;
      const size_t region_bytes = std::max({size, want, state_->Bytes()});
      state_->regions.push_back(
          std::make_unique<ArenaRegion>(SharedRegion::Create(state_->dir, region_bytes, /*populate=*/true)));
      region = state_->regions.back().get();
      piece.region_ = state_->regions.size() - 1;
      region->Take(size, &offset, &dirty);
    }
    piece.span_ = region->region.Span(offset, bytes);
  }
  piece.span_.arena = true;
  piece.state_ = state_;
  piece.size_ = size;
  if (zero && dirty > 0) std::memset(piece.span_.data, 0, std::min(bytes, dirty));
  return piece;
}

size_t SharedArena::bytes() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->Bytes();
}

size_t SharedArena::free_bytes() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  size_t total = 0;
  for (const auto& r : state_->regions) {
    for (const auto& run : r->free) total += run.second;
  }
  return total;
}

std::vector<std::string> SharedArena::regions() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  std::vector<std::string> names;
  for (const auto& r : state_->regions) names.push_back(r->region.name());
  return names;
}

SharedPiece::~SharedPiece() { Release(); }

SharedPiece::SharedPiece(SharedPiece&& other) noexcept { *this = std::move(other); }

SharedPiece& SharedPiece::operator=(SharedPiece&& other) noexcept {
  if (this != &other) {
    Release();
    state_ = std::move(other.state_);
    region_ = other.region_;
    size_ = other.size_;
    span_ = std::move(other.span_);
    other.span_ = SharedSpan{};
  }
  return *this;
}

void SharedPiece::Release() {
  if (state_ == nullptr) return;
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->regions[region_]->Give(span_.offset, size_);
  }
  state_.reset();
  span_ = SharedSpan{};
}

}  // namespace gpuscan
