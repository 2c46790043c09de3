// Payloads: the memory that carries one chunk's bytes from the request, through the engine, into
// the response, with no copy in between. A raw RPC gathers its request's data field out of
// gRPC's slices into a payload (the one copy the server makes), the engine computes on it (a
// scan in place; the pool's blocks are registered with the CUDA engine, so it skips its staging
// copies too), and the response hands the payload to gRPC as a slice that gives it back to the
// pool once gRPC has written it to the socket.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include <grpcpp/support/slice.h>

namespace gpuscan::server {

class PayloadPool;

// One chunk's bytes: a block of a pool, or heap memory when the pool has none free or the
// chunk is larger than a block. Move-only; goes back to its pool when destroyed.
class Payload {
 public:
  Payload() = default;
  ~Payload();
  Payload(Payload&& other) noexcept;
  Payload& operator=(Payload&& other) noexcept;
  Payload(const Payload&) = delete;
  Payload& operator=(const Payload&) = delete;

  char* data() const;
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  bool pooled() const;  // a block of a pool (registered for DMA when the pool's engine can)
  // Keeps the first `bytes` (at most size()): an output taken at its largest, cut to what was made.
  void Truncate(size_t bytes) { size_ = bytes < size_ ? bytes : size_; }

  // The bytes, handed to gRPC: the slice owns them and returns them when gRPC is done with it.
  grpc::Slice ToSlice() &&;
  // A heap copy of the same bytes (for the rare message that must be duplicated).
  Payload Copy() const;

 private:
  friend class PayloadPool;
  struct Block;
  Payload(Block* block, size_t size) : block_(block), size_(size) {}
  static void Free(void* block);  // grpc_slice destroy callback; also the destructor's path

  Block* block_ = nullptr;
  size_t size_ = 0;
};

// Fixed-size blocks carved from arenas made on demand (a few at a time) up to a byte limit. Each
// arena is registered through `register_host` (the engine's RegisterHost; a null result leaves it
// plain memory). Thread-safe: payloads come back on gRPC's threads.
class PayloadPool : public std::enable_shared_from_this<PayloadPool> {
 public:
  using RegisterHost = std::function<std::shared_ptr<void>(void* data, uint64_t bytes)>;

  // max_bytes = 0: no blocks at all (every payload on the heap).
  static std::shared_ptr<PayloadPool> Create(size_t block_bytes, uint64_t max_bytes, RegisterHost register_host);
  ~PayloadPool();

  // A payload of `bytes` (uninitialized): a free block when it fits in one, else the heap.
  Payload Take(size_t bytes);

  size_t block_bytes() const { return block_bytes_; }
  struct Stats {
    uint64_t arena_bytes = 0;     // made so far (never more than max_bytes)
    uint64_t registered_bytes = 0;  // of those, registered with the engine
    uint64_t blocks_free = 0;
    uint64_t heap_payloads = 0;   // payloads that did not get a block (too large, or none free)
  };
  Stats stats() const;

 private:
  friend class Payload;  // gives blocks back
  struct Arena {
    void* memory = nullptr;
    size_t bytes = 0;
    std::shared_ptr<void> registration;
  };
  PayloadPool(size_t block_bytes, uint64_t max_bytes, RegisterHost register_host);
  bool GrowLocked();  // adds an arena; false at the limit or when memory is short
  void Give(Payload::Block* block);

  const size_t block_bytes_;
  const uint64_t max_bytes_;
  const RegisterHost register_host_;
  mutable std::mutex mu_;
  std::vector<Arena> arenas_;
  std::vector<Payload::Block*> free_;
  std::vector<std::unique_ptr<Payload::Block>> blocks_;  // every pooled block, owned here
  uint64_t arena_bytes_ = 0, registered_bytes_ = 0, heap_payloads_ = 0;
};

}  // namespace gpuscan::server
