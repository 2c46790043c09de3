// The soak test's calls: a weighted random mix of every operation of the service (Scan, Reduce,
// Compact, SegmentedScan over keys and over head flags, ReduceByKey, Sort of keys, of key+value
// pairs and argsort, Histogram with even or explicit bins, Scan2D) over every dtype, operator and
// output kind, and, for the operations that have them (Scan, Reduce, Compact), every transport:
// one ordinary stream, striped lanes (per call, or the Client's ClientOptions::lanes) and shared
// memory (regions under the server's --shm-dir). Sizes log-uniform from one element to the
// largest request plus sizes at the tile, block, sub-chunk, chunk and lane boundaries of both
// engines; random data (never all zeros, never all the operator's identity); every result checked
// against an independent sequential reference (tests/common/reference.h, and a stable sort in
// IEEE totalOrder here), with the same float tolerances as the integration tests.
#pragma once

#include <cstdint>
#include <deque>
#include <random>
#include <string>

#include "gpuscan/client.h"

namespace gpuscan::soak {

enum class Operation {
  kScan,
  kReduce,
  kCompact,
  kSegmentedScanKeys,
  kSegmentedScanHeads,
  kReduceByKey,
  kSort,
  kSortPairs,
  kArgsort,
  kHistogram,
  kScan2D,
};
inline constexpr int kOperations = 11;
const char* Name(Operation op);

// How the array travels. Only Scan, Reduce and Compact have lanes and shared memory; every
// other operation is one stream. kResident (Scan and Reduce): the array is put on the server
// first (PutArray), the call names it, and a scan keeps its result there half the time.
enum class Transport { kStream, kLanes, kShm, kResident };
inline constexpr int kTransports = 4;
const char* Name(Transport t);
// Whether the operation can go over lanes and shared memory; and whether over kResident.
bool HasTransports(Operation op);
bool HasResident(Operation op);

// What the calls may use besides one stream.
struct Transports {
  // Striped calls use 2..max_lanes lanes (each call's own count, or the Client's default);
  // below 2: no striped calls.
  uint32_t max_lanes = 4;
  // ClientOptions::lanes of the Client the calls run on: above 1, some striped calls leave
  // their lane count to it (lanes = 0), and every other call asks for one lane explicitly.
  uint32_t client_lanes = 1;
  // The server's --shm-dir as this process sees it; empty: no shared-memory calls.
  std::string shm_dir;
  // The server keeps resident arrays (--resident-bytes): Scan and Reduce over kResident.
  bool resident = false;
};

struct Plan {
  Operation operation = Operation::kScan;
  Transport transport = Transport::kStream;
  uint32_t lanes = 1;  // kLanes: lanes for this call (0: the Client's ClientOptions::lanes)
  v1::DType dtype = v1::DTYPE_INT32;
  v1::Operator op = v1::OPERATOR_SUM;        // scan, reduce, segmented scans, reduce by key, scan2d
  bool exclusive = false;                     // scan, segmented scans
  bool in_place = false;                      // scan over shared memory: the result over the input;
                                              // resident: the result kept on the server
  bool use_flags = false;                     // compact: flags, else a predicate
  v1::PredicateOp predicate = v1::PREDICATE_OP_NONZERO;
  v1::CompactOutput output = v1::COMPACT_OUTPUT_VALUES;
  v1::DType key_dtype = v1::DTYPE_INT32;      // segmented scan by keys, reduce by key
  uint64_t mean_run = 1;                      // segments: their mean length
  v1::DType values_dtype = v1::DTYPE_INT32;   // sort pairs: the values
  bool descending = false;                    // sorts
  uint32_t bins = 10;                         // histogram: bins
  bool explicit_edges = false;                // histogram: edges given, else even bins
  uint64_t cols = 1;                          // scan2d: elements per row (elements = rows x cols)
  uint64_t elements = 1;
  std::string Describe() const;  // "scan int32 sum exclusive lanes=3 n=1025"
  uint64_t InputBytes() const;   // values (keys, flags) sent
  // Bytes the client holds for this call at once: input, results, references, regions.
  uint64_t ClientBytes() const;
};

struct Outcome {
  bool rpc_ok = false;
  bool correct = false;
  std::string error;      // the RpcError, or what was wrong with the result
  uint64_t bytes_in = 0;  // payload bytes sent (or read by the server from shared memory)
  uint64_t bytes_out = 0; // payload bytes received (or written by the server into shared memory)
};

// One client's shared-memory regions, reused between its calls as a real co-located client
// does (the server keeps a region's mapping, and its DMA registration on the CUDA engine, between
// calls), up to `keep_bytes` of idle regions; larger ones are made for the call and deleted
// after it. Not thread-safe: one per client thread. Deleting it deletes every idle region.
class RegionPool {
 public:
  RegionPool(std::string dir, uint64_t keep_bytes) : dir_(std::move(dir)), keep_bytes_(keep_bytes) {}
  const std::string& dir() const { return dir_; }
  // A region of at least `bytes` bytes (idle and not much larger, else a new one).
  SharedRegion Take(uint64_t bytes);
  void Give(SharedRegion region);

 private:
  std::string dir_;
  uint64_t keep_bytes_;
  uint64_t idle_bytes_ = 0;
  std::deque<SharedRegion> idle_;  // oldest first
};

class Workload {
 public:
  // max_bytes: the largest request's input; client_chunk_bytes: what the clients send per message
  // (its boundaries, and the lanes' stripes of it, are among the sizes drawn).
  Workload(uint64_t max_bytes, uint64_t client_chunk_bytes, Transports transports = {});
  Plan Draw(std::mt19937_64& rng) const;
  // Runs the call and checks its result. Never throws for RPC failures (they are the outcome).
  // Shared-memory calls take their regions from `pool` (nullptr: regions made for the call).
  Outcome Run(Client& client, const Plan& plan, std::mt19937_64& rng, RegionPool* pool = nullptr) const;
  // A streaming int64 sum scan of `bytes`, data generated and the result checked on the fly
  // (the client holds one chunk, whatever the size). Each client's first call: it brings its
  // connection's buffers and flow-control windows to full size before the RSS baseline.
  Outcome RunStreamingScan(Client& client, uint64_t bytes, uint64_t seed) const;
  const Transports& transports() const { return transports_; }

 private:
  uint64_t Size(v1::DType dtype, uint64_t max_bytes, uint32_t lanes, std::mt19937_64& rng) const;
  uint64_t max_bytes_;
  uint64_t client_chunk_bytes_;
  Transports transports_;
};

}  // namespace gpuscan::soak
