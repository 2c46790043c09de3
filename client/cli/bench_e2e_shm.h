// gpuscan bench --e2e --shm: the shared-memory side of the end-to-end benchmark: the arena
// pieces each concurrent call uses, the calls on them, and the two ceilings the runs are measured
// against (the host's own pass over the same bytes, and the server device's PCIe link).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "bench.h"
#include "gpuscan/client.h"

namespace gpuscan::cli {

// Shared memory: one input and one output piece of the client's arena (shared_arena.h) per
// concurrent call, carved and used once before a level starts (the server maps and registers an
// arena's region on its first call; the first calls on fresh pieces are printed apart), then
// taken from the pool.
class RegionPool {
 public:
  struct Pair {
    SharedPiece in, out;
  };
  RegionPool(std::string dir, const std::string& input) : arena_(std::move(dir)), input_(input) {}
  // Makes the pool `count` pairs deep, warming each new pair with `warm` (two calls).
  void Fill(unsigned count, const std::function<void(Pair&)>& warm);
  Pair* Take() {
    std::lock_guard<std::mutex> lock(mu_);
    Pair* p = free_.back();
    free_.pop_back();
    return p;
  }
  void Give(Pair* p) {
    std::lock_guard<std::mutex> lock(mu_);
    free_.push_back(p);
  }

 private:
  SharedArena arena_;
  const std::string& input_;
  std::mutex mu_;
  std::vector<std::unique_ptr<Pair>> all_;
  std::vector<Pair*> free_;
};

// Host passes over shared-memory regions on kHostThreads threads: the check's memcmp, and the
// --shm ceiling (the host's own copy, or read, of the same bytes); one thread would take longer
// than the call.
inline constexpr unsigned kHostThreads = 8;

// The --shm ceiling: what moving the same bytes through host memory costs here. A call that
// writes results (scan, compact) against copying the input region into the output region; one
// that only reads (reduce) against reading the input once (an XOR of its 8-byte words).
void HostPass(const void* in, void* out, size_t bytes, bool copy);

// One call on shared memory (a scan writes into the output region, a compaction its kept
// values), checked like a stream when `expected` is set.
Timing SharedCall(Client& client, const E2EArgs& a, v1::DType dtype, RegionPool::Pair& r, size_t bytes,
                  const std::string& expected, const v1::Predicate& predicate);

// The --shm runs' second ceiling, the PCIe link of the server's device: the kernel suite's
// "pcie" rows (Benchmark RPC) copy the same bytes between pinned host memory and the device,
// each way and both at once. A scan or compaction moves its input in and its output out at once
// (duplex); a reduce only in (h2d). Prints one line; returns the JSON member (",\"pcie\":{...}"),
// or "" where the server cannot measure it (a CPU engine), said on that line.
std::string PcieCeiling(Client& client, const E2EArgs& a, v1::DType dtype, uint64_t n, double best_gbps);

}  // namespace gpuscan::cli
