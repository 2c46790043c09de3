// An operation's header.resident (see Resident in the proto): the input arrays the call holds
// while it runs, and, for keep, what the results will be kept as. The handlers run resident
// inputs through their device-memory path (ProcessDevice), since the arrays lie in the memory the
// engine computes on; what has no such path is fed to the streamed one (resident_feed.h).
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
  // The inputs, held until the call ends (null: not named).
  std::shared_ptr<const ResidentArray> values, flags, keys, sort_values;
  bool keep = false;
  uint64_t ttl_ms = 0;
  std::string label;
};

// The inputs besides values that the RPC's header asks for (see Resident in the proto).
struct ResidentWants {
  bool flags = false;         // Compact with use_flags, SegmentedScan with heads: 1 byte an element
  int keys_dtype = 0;         // SegmentedScan with key_dtype, ReduceByKey: the keys' v1::DType (0: none)
  int sort_values_dtype = 0;  // Sort with KEYS_AND_VALUES: the values' v1::DType (0: none)
};

// What a header (accepted by ToEngine) asks for besides values: one rule for the handlers and the
// request fuzzer.
inline ResidentWants WantsOf(const v1::CompactHeader& h) {
  ResidentWants w;
  w.flags = h.selector_case() == v1::CompactHeader::kUseFlags && h.use_flags();
  return w;
}
inline ResidentWants WantsOf(const v1::SegmentedScanHeader& h) {
  ResidentWants w;
  w.flags = h.segments_case() == v1::SegmentedScanHeader::kHeads;
  if (h.segments_case() == v1::SegmentedScanHeader::kKeyDtype) w.keys_dtype = h.key_dtype();
  return w;
}
inline ResidentWants WantsOf(const v1::ReduceByKeyHeader& h) {
  ResidentWants w;
  w.keys_dtype = h.key_dtype();
  return w;
}
inline ResidentWants WantsOf(const v1::SortHeader& h) {
  ResidentWants w;
  if (h.output() == v1::SORT_OUTPUT_KEYS_AND_VALUES) w.sort_values_dtype = h.values_dtype();
  return w;
}
inline ResidentWants WantsOf(const v1::ScanHeader&) { return {}; }
inline ResidentWants WantsOf(const v1::ReduceHeader&) { return {}; }
inline ResidentWants WantsOf(const v1::HistogramHeader&) { return {}; }
inline ResidentWants WantsOf(const v1::Scan2DHeader&) { return {}; }

// What else the header sets, for the refusals of what cannot go with header.resident.
struct ResidentConflicts {
  bool shared_memory = false;
  bool device_memory = false;
  bool lanes = false;
  bool keep_allowed = true;  // the RPC has a result array to keep (Reduce: no)
};

// Checks header.resident and finds its array: UNIMPLEMENTED when the server keeps none,
// INVALID_ARGUMENT naming the field for what cannot go with it, a missing values id, a dtype or
// element count that differs from the array's, a long label; ResidentStore::Find's NOT_FOUND.
// On success *device points the call's device-memory path at the arrays (in, and flags, keys or
// values for the other inputs `wants` names; the outputs unset).
grpc::Status OpenResident(ResidentStore& store, const grpc::ServerContextBase& ctx, const v1::Resident& header,
                          int header_dtype, std::optional<uint64_t> declared_count, const ResidentConflicts& conflicts,
                          ResidentCall* call, DeviceRanges* device, const ResidentWants& wants = {});
// The same for an RPC of several inputs: also INVALID_ARGUMENT naming header.resident.flags, .keys
// or .sort_values when one the header asks for (`wants`) is missing or one it does not is set,
// and when a found one's dtype or element count does not go with the values'. Fills *call only.
grpc::Status OpenResidentInputs(ResidentStore& store, const grpc::ServerContextBase& ctx, const v1::Resident& header,
                                int header_dtype, std::optional<uint64_t> declared_count, const ResidentWants& wants,
                                const ResidentConflicts& conflicts, ResidentCall* call);

// The memory a kept result goes into (counted against the budget from now), or a scratch
// buffer of the engine's for a result that streams back: RESOURCE_EXHAUSTED when neither fits.
grpc::Status ResidentOutput(ResidentStore& store, const ResidentCall& call, uint64_t bytes,
                            std::shared_ptr<engine::ResidentMemory>* out);

// PutArray's checks, in the handler's order (resident_handler.cc; the request fuzzer runs them
// too): the header, then each request's data as it arrives, then the stream's end.
class PutChecks {
 public:
  PutChecks(const ResidentStore& store, uint64_t chunk_bytes) : store_(store), chunk_bytes_(chunk_bytes) {}
  // UNIMPLEMENTED when the server keeps no arrays; INVALID_ARGUMENT naming header.dtype,
  // header.label or the tenant metadata; RESOURCE_EXHAUSTED for a header.element_count past the
  // budget. On success *tenant is the caller's (TenantOf).
  grpc::Status Header(const v1::PutArrayHeader& header, const grpc::ServerContextBase& ctx, std::string* tenant);
  // Request `index`'s data of `bytes`: RESOURCE_EXHAUSTED past the chunk limit or (with what came
  // before) the budget; INVALID_ARGUMENT for part of an element or more elements than declared.
  grpc::Status Chunk(uint64_t bytes, uint64_t index);
  // The stream's end, `bytes` received in all: INVALID_ARGUMENT for fewer elements than declared.
  grpc::Status Finish(uint64_t bytes) const;

  const v1::PutArrayHeader& header() const { return header_; }  // once Header accepted it
  size_t element_size() const { return size_; }

 private:
  const ResidentStore& store_;
  uint64_t chunk_bytes_;
  v1::PutArrayHeader header_;
  size_t size_ = 1;
  uint64_t arrived_ = 0;  // bytes checked
};

// GetArray's range (resident_handler.cc; the request fuzzer runs it too): elements [first, end)
// of the array, `step` elements a response (the request's chunk_bytes, at most the server's),
// each of element_size bytes.
struct GetRange {
  uint64_t first = 0, end = 0, step = 1;
  size_t element_size = 1;
};
// OUT_OF_RANGE naming the offset (and count) that pass the array's end.
grpc::Status PlanGet(const v1::GetArrayRequest& request, const ResidentArray& array, uint64_t chunk_bytes,
                     GetRange* range);

// GetArray into the caller's memory (request.shared_memory / device_memory), its own checks
// before an operation's (OpenShared / OpenDevice, as an in-place Scan's output): INVALID_ARGUMENT
// for both set, an operation's output field set (output_region / output_handle, output_offset:
// the range goes to region / handle at offset), bytes other than the range's length.
grpc::Status CheckGetArrayMemory(const v1::GetArrayRequest& request, const GetRange& range);
// The operations' checks name their header's fields (header.shared_memory.region); GetArray's
// are the request's own (shared_memory.region): the status with the "header." of those cut.
grpc::Status GetArrayFieldNames(const grpc::Status& s);

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
