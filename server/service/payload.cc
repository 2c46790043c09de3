#include "service/payload.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstring>
#include <utility>

namespace gpuscan::server {

// A pooled block points into an arena and names its pool (which it keeps alive while out: a
// slice may outlive the server that made it); a heap block owns its memory.
struct Payload::Block {
  char* data = nullptr;
  std::shared_ptr<PayloadPool> pool;  // set while a pooled block is out; null for heap blocks
  std::unique_ptr<char[]> heap;
};

Payload::~Payload() {
  if (block_) Free(block_);
}

Payload::Payload(Payload&& other) noexcept
    : block_(std::exchange(other.block_, nullptr)), size_(std::exchange(other.size_, 0)) {}

Payload& Payload::operator=(Payload&& other) noexcept {
  if (this != &other) {
    if (block_) Free(block_);
    block_ = std::exchange(other.block_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

char* Payload::data() const { return block_ ? block_->data : nullptr; }

bool Payload::pooled() const { return block_ && !block_->heap; }

void Payload::Free(void* p) {
  auto* block = static_cast<Block*>(p);
  if (block->heap) {
    delete block;
    return;
  }
  std::shared_ptr<PayloadPool> pool = std::move(block->pool);
  pool->Give(block);
}

grpc::Slice Payload::ToSlice() && {
  Block* block = std::exchange(block_, nullptr);
  const size_t size = std::exchange(size_, 0);
  if (!block) return grpc::Slice();
  if (size == 0) {
    Free(block);
    return grpc::Slice();
  }
  return grpc::Slice(block->data, size, &Payload::Free, block);
}

Payload Payload::Copy() const {
  auto* block = new Block;
  block->heap.reset(new char[std::max<size_t>(size_, 1)]);
  block->data = block->heap.get();
  if (size_) std::memcpy(block->data, data(), size_);
  return Payload(block, size_);
}

std::shared_ptr<PayloadPool> PayloadPool::Create(size_t block_bytes, uint64_t max_bytes, RegisterHost register_host) {
  return std::shared_ptr<PayloadPool>(new PayloadPool(block_bytes, max_bytes, std::move(register_host)));
}

PayloadPool::PayloadPool(size_t block_bytes, uint64_t max_bytes, RegisterHost register_host)
    : block_bytes_(std::max<size_t>(block_bytes, 4096)), max_bytes_(max_bytes), register_host_(std::move(register_host)) {}

PayloadPool::~PayloadPool() {
  // Every block is back (an outstanding one holds the pool). Registrations go before the memory.
  for (Arena& a : arenas_) {
    a.registration.reset();
    munmap(a.memory, a.bytes);
  }
}

bool PayloadPool::GrowLocked() {
  // Arenas of up to 64 MiB: registering one costs ~25 ms, paid on the call that first needs it.
  constexpr uint64_t kArenaBytes = uint64_t{64} << 20;
  const uint64_t room = max_bytes_ > arena_bytes_ ? max_bytes_ - arena_bytes_ : 0;
  const uint64_t blocks = std::min(std::max<uint64_t>(kArenaBytes / block_bytes_, 1), room / block_bytes_);
  if (blocks == 0) return false;
  Arena arena;
  arena.bytes = blocks * block_bytes_;
  arena.memory = mmap(nullptr, arena.bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (arena.memory == MAP_FAILED) return false;
  if (register_host_) arena.registration = register_host_(arena.memory, arena.bytes);
  arena_bytes_ += arena.bytes;
  if (arena.registration) registered_bytes_ += arena.bytes;
  for (uint64_t i = 0; i < blocks; ++i) {
    auto block = std::make_unique<Payload::Block>();
    block->data = static_cast<char*>(arena.memory) + i * block_bytes_;
    free_.push_back(block.get());
    blocks_.push_back(std::move(block));
  }
  arenas_.push_back(std::move(arena));
  return true;
}

Payload PayloadPool::Take(size_t bytes) {
  if (bytes <= block_bytes_) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!free_.empty() || GrowLocked()) {
      Payload::Block* block = free_.back();
      free_.pop_back();
      block->pool = shared_from_this();
      return Payload(block, bytes);
    }
    ++heap_payloads_;
  } else {
    std::lock_guard<std::mutex> lock(mu_);
    ++heap_payloads_;
  }
  auto* block = new Payload::Block;
  block->heap.reset(new char[std::max<size_t>(bytes, 1)]);
  block->data = block->heap.get();
  return Payload(block, bytes);
}

void PayloadPool::Give(Payload::Block* block) {
  std::lock_guard<std::mutex> lock(mu_);
  free_.push_back(block);
}

PayloadPool::Stats PayloadPool::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return {arena_bytes_, registered_bytes_, free_.size(), heap_payloads_};
}

}  // namespace gpuscan::server
