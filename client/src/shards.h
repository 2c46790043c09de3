// Internal: one array across several servers (ClientOptions::shards). The array is cut into
// contiguous shards on chunk boundaries; shard i runs on address i mod A of the target (A
// addresses), each on a connection of its own, all at once; results are combined here.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "gpuscan/client.h"

namespace gpuscan::detail {

// One client per (address, connection), made on first use and kept for later calls.
class ShardPool {
 public:
  explicit ShardPool(ClientOptions options) : options_(std::move(options)) {}
  // Clients for `shards` shards: shard i on address (r + i) mod A, where r rotates per call so
  // that concurrent sharded calls start on different servers.
  std::vector<Client*> Clients(uint32_t shards);

 private:
  const ClientOptions options_;
  std::mutex mu_;
  bool expanded_ = false;
  std::vector<std::string> addresses_;
  std::string tls_name_;
  uint64_t rotation_ = 0;
  std::map<std::pair<std::string, uint32_t>, std::unique_ptr<Client>> clients_;
};

// Whether a call with this dtype, operator and algorithm may be sharded: not float SUM/PRODUCT
// under the deterministic (or default) algorithm, whose bits a carry fix-up would change.
bool Shardable(v1::DType dtype, v1::Operator op, v1::ScanAlgorithm algorithm);

// Element bounds of `shards` contiguous shards of n elements, cut on multiples of per_chunk:
// shards + 1 values from 0 to n.
std::vector<size_t> ShardBounds(size_t n, size_t per_chunk, uint32_t shards);

// The sharded typed calls: shard s is elements [bounds[s], bounds[s + 1]) on clients[s].
// Scan results go to out[0, bounds.back()), each shard's straight from its own thread.
template <class T>
Timing ShardedScan(const std::vector<Client*>& clients, const std::vector<size_t>& bounds, const T* data, T* out,
                   const ScanOptions& options);
template <class T>
ReduceResult<T> ShardedReduce(const std::vector<Client*>& clients, const std::vector<size_t>& bounds, const T* data,
                              v1::Operator op, uint32_t lanes);
template <class T>
CompactResult<T> ShardedCompact(const std::vector<Client*>& clients, const std::vector<size_t>& bounds, const T* data,
                                const CompactOptions& options);

}  // namespace gpuscan::detail
