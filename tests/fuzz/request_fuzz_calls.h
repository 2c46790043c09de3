// The request fuzzer's calls, one per RPC (request_fuzz_calls.cc): what the handler checks, then
// the CPU engine against the reference. request_fuzz_target.cc decodes the input into these.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <grpcpp/support/status.h>

namespace gpuscan::fuzz {

// One request message of the call, as the input encodes it (request_fuzz_target.h).
struct Request {
  bool has_header = false;
  std::string header, data, flags;
};

// How a call ended: its status, and the elements the engine was given.
struct Result {
  grpc::Status status;
  uint64_t elements = 0;
};

// Prints why and aborts: an invariant of request_fuzz_target.h is violated.
[[noreturn]] void Fail(const std::string& why);

// Runs `requests` as one call of `rpc` (0..7, request_fuzz_target.h's order) under the limits.
Result FuzzCall(int rpc, const std::vector<Request>& requests, uint64_t chunk_bytes, uint64_t max_request_bytes,
                uint64_t max_sort_bytes);

// Runs `requests` as one resident call (request_fuzz_target.h's kinds 0..13: PutArray, GetArray,
// DropArray, ListArrays, Scan and Reduce, then Compact, Histogram, Scan2D, SegmentedScan,
// ReduceByKey and Sort with header.resident, then Pipeline and Pipeline's plan alone) against a
// ResidentStore of its own (budget_bytes 0: not served).
Result FuzzResidentCall(int kind, const std::vector<Request>& requests, uint64_t chunk_bytes, uint64_t budget_bytes,
                        uint64_t tenant_quota_bytes);

}  // namespace gpuscan::fuzz
