// Calls whose array lives in shared memory (header.shared_memory): checking the header's
// ranges against the RPC, mapping them (shm_region.h) and running the engine over them in
// pieces. The handlers keep their streamed path; this is the part of theirs that differs.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include <grpcpp/support/status.h>

#include "gpuscan/v1/gpuscan.pb.h"
#include "service/shm_region.h"

namespace gpuscan::server {

// The mapped ranges of one call. `out` is `in` itself for a Scan in place.
struct SharedRanges {
  shm::RegionView in, out, indices, flags;
  bool in_place = false;
  uint64_t elements = 0;
};

// What the RPC reads and writes besides its input.
struct SharedNeeds {
  bool scan_output = false;     // Scan: output_region, or in place
  bool values_output = false;   // Compact: kept values
  bool indices_output = false;  // Compact: kept indices
  bool flags_input = false;     // Compact with use_flags
  const char* rpc = "Reduce";   // the RPC, for "... writes no output"
  size_t key_bytes = 0;         // SegmentedScan on device memory: bytes of keys per element
};

// One output or side range as a header names it: set (a region or handle given), how an error
// shows it, and its offset.
struct NamedRange {
  bool set = false;
  std::string shown;
  uint64_t offset = 0;
};

// The ranges besides the input that a shared- or device-memory header may name, and their field names.
struct RangeFields {
  NamedRange output, indices, flags;
  const char* output_field;
  const char* indices_field;
  const char* flags_field;
  const char* output_offset_field;
};

// The rules both kinds of header share: INVALID_ARGUMENT (prefix + field) for a range the RPC
// does not use, one it needs and misses, an output offset without its output (scan in place).
grpc::Status CheckRangeFields(const std::string& prefix, const RangeFields& fields, const SharedNeeds& needs);

// INVALID_ARGUMENT when the header's declared element count differs from prefix + "bytes".
grpc::Status CheckDeclaredCount(const std::string& prefix, uint64_t bytes, size_t element_size,
                                std::optional<uint64_t> declared_count);

// Checks and maps header.shared_memory for an RPC with these needs: INVALID_ARGUMENT naming the
// field for a range the RPC does not use or misses, overlapping ranges, a declared element
// count that differs; RESOURCE_EXHAUSTED past --max-request-bytes; RegionDir::Map's errors.
grpc::Status OpenShared(shm::RegionDir& regions, const v1::SharedMemory& header, size_t element_size,
                        const SharedNeeds& needs, std::optional<uint64_t> declared_count, uint64_t max_request_bytes,
                        SharedRanges* out);

// INVALID_ARGUMENT when a request of a call whose arrays lie elsewhere (header_field: its
// header.shared_memory or header.device_memory) carries payload bytes in `field`.
grpc::Status NoInlinePayload(uint64_t bytes, const char* field, uint64_t request_index,
                             const char* header_field = "header.shared_memory");

// Runs piece(first, n) over [0, elements) in order, in pieces of about kPieceBytes, stopping
// with CANCELLED once cancelled() turns true. Pieces bound how long a cancelled call runs on
// (~6 ms at the link's rate); each also fills and drains the engine's copy pipeline once (~0.1
// ms), so they are not smaller.
inline constexpr uint64_t kSharedPieceBytes = uint64_t{256} << 20;
grpc::Status ForEachPiece(uint64_t elements, size_t element_size, const std::function<bool()>& cancelled,
                          const std::function<void(uint64_t, uint64_t)>& piece);

// After the computation: every range still backed by its file (shm::RegionView::CheckIntact).
grpc::Status CheckIntact(const SharedRanges& ranges);

}  // namespace gpuscan::server
