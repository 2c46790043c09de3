// An operation's header.resident (see Resident in the proto): the input array the call holds
// while it runs, and, for keep, what the result will be kept as. The handlers run a resident
// input through their device-memory path (ProcessDevice), since the array lies in the memory the
// engine computes on.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <grpcpp/server_context.h>
#include <grpcpp/support/status.h>

#include "engine/engine.h"
#include "gpuscan/v1/gpuscan.pb.h"
#include "service/device_memory.h"
#include "service/payload.h"
#include "service/resident_store.h"

namespace gpuscan::server {

struct ResidentCall {
  std::string tenant;
  std::shared_ptr<const ResidentArray> values;  // held until the call ends
  bool keep = false;
  uint64_t ttl_ms = 0;
  std::string label;
};

// What else the header sets, for the refusals of what cannot go with header.resident.
struct ResidentConflicts {
  bool shared_memory = false;
  bool device_memory = false;
  bool lanes = false;
  bool narrow = false;      // a narrow dtype (header.dtype)
  bool keep_allowed = true;  // the RPC has a result array to keep (Reduce: no)
};

// Checks header.resident and finds its array: UNIMPLEMENTED when the server keeps none,
// INVALID_ARGUMENT naming the field for what cannot go with it, a missing values id, a dtype or
// element count that differs from the array's, a long label; ResidentStore::Find's NOT_FOUND.
// On success *device points the call's device-memory path at the array (in; out unset).
grpc::Status OpenResident(ResidentStore& store, const grpc::ServerContextBase& ctx, const v1::Resident& header,
                          int header_dtype, std::optional<uint64_t> declared_count, const ResidentConflicts& conflicts,
                          ResidentCall* call, DeviceRanges* device);

// The memory a kept result goes into (counted against the budget from now), or a scratch
// buffer of the engine's for a result that streams back: RESOURCE_EXHAUSTED when neither fits.
grpc::Status ResidentOutput(ResidentStore& store, const ResidentCall& call, uint64_t bytes,
                            std::shared_ptr<engine::ResidentMemory>* out);

// The result memory's `bytes` read back in pieces of at most chunk_bytes (whole elements of
// element_size), each into a payload: f(payload, first_element) for each, in order.
template <class F>
void ReadBack(const engine::ResidentMemory& memory, uint64_t bytes, size_t element_size, uint64_t chunk_bytes,
              PayloadPool& payloads, F&& f) {
  const uint64_t step = std::max<uint64_t>(element_size, chunk_bytes / element_size * element_size);
  for (uint64_t at = 0; at < bytes; at += step) {
    const uint64_t n = std::min(step, bytes - at);
    Payload p = payloads.Take(n);
    memory.Read(at, p.data(), n);
    f(std::move(p), at / element_size);
  }
}

}  // namespace gpuscan::server
