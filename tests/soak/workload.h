// The soak test's calls: a random mix of every operation, dtype, operator and output kind, with
// sizes log-uniform from one element to the largest request plus sizes at the tile, block,
// sub-chunk and chunk boundaries of both engines; random data (never all zeros, never all the
// operator's identity); every result checked against the sequential reference of
// tests/common/reference.h, with the same float tolerances as the integration tests.
#pragma once

#include <cstdint>
#include <random>
#include <string>

#include "gpuscan/client.h"

namespace gpuscan::soak {

enum class Operation { kScan, kReduce, kCompact };
inline constexpr int kOperations = 3;
const char* Name(Operation op);

struct Plan {
  Operation operation = Operation::kScan;
  v1::DType dtype = v1::DTYPE_INT32;
  v1::Operator op = v1::OPERATOR_SUM;        // scan, reduce
  bool exclusive = false;                     // scan
  bool use_flags = false;                     // compact: flags, else a predicate
  v1::PredicateOp predicate = v1::PREDICATE_OP_NONZERO;
  v1::CompactOutput output = v1::COMPACT_OUTPUT_VALUES;
  uint64_t elements = 1;
  std::string Describe() const;  // "scan int32 sum exclusive n=1025"
  uint64_t InputBytes() const;   // values (and flags) sent
  // Bytes the client holds for this call at once: input, results, flags.
  uint64_t ClientBytes() const;
};

struct Outcome {
  bool rpc_ok = false;
  bool correct = false;
  std::string error;      // the RpcError, or what was wrong with the result
  uint64_t bytes_in = 0;  // payload bytes sent
  uint64_t bytes_out = 0; // payload bytes received
};

class Workload {
 public:
  // max_bytes: the largest request's input; client_chunk_bytes: what the clients send per message
  // (its boundaries are among the sizes drawn).
  Workload(uint64_t max_bytes, uint64_t client_chunk_bytes);
  Plan Draw(std::mt19937_64& rng) const;
  // Runs the call and checks its result. Never throws for RPC failures (they are the outcome).
  Outcome Run(Client& client, const Plan& plan, std::mt19937_64& rng) const;
  // A streaming int64 sum scan of `bytes`, data generated and the result checked on the fly
  // (the client holds one chunk, whatever the size). Each client's first call: it brings its
  // connection's buffers and flow-control windows to full size before the RSS baseline.
  Outcome RunStreamingScan(Client& client, uint64_t bytes, uint64_t seed) const;

 private:
  uint64_t Size(v1::DType dtype, std::mt19937_64& rng) const;
  uint64_t max_bytes_;
  uint64_t client_chunk_bytes_;
};

}  // namespace gpuscan::soak
