#include "service/shared_memory.h"
#include "service/status.h"

#include <algorithm>

namespace gpuscan::server {
namespace {

const std::string kSharedPrefix = "header.shared_memory.";

// A range the RPC does not use must be left empty (a set one would be silently ignored).
grpc::Status Unused(const std::string& prefix, const NamedRange& r, const char* field, const char* why) {
  if (!r.set && r.offset == 0) return grpc::Status::OK;
  return InvalidArgument(prefix + field + " " + r.shown + ": " + why);
}

grpc::Status Required(const std::string& prefix, const NamedRange& r, const char* field, const char* why) {
  if (r.set) return grpc::Status::OK;
  return InvalidArgument(prefix + field + ": required " + why);
}

grpc::Status Disjoint(const shm::RegionView& a, const char* a_field, const shm::RegionView& b, const char* b_field) {
  if (!a.Overlaps(b)) return grpc::Status::OK;
  return InvalidArgument(kSharedPrefix + a_field + " \"" + a.name() + "\" overlaps " + kSharedPrefix + b_field + " \"" + b.name() +
                 "\": output ranges may not overlap other ranges");
}

NamedRange Region(const std::string& name, uint64_t offset) { return {!name.empty(), "\"" + name + "\"", offset}; }

}  // namespace

grpc::Status CheckRangeFields(const std::string& prefix, const RangeFields& f, const SharedNeeds& needs) {
  const bool writes_output = needs.scan_output || needs.values_output;
  if (!writes_output) {
    const std::string why =
        needs.indices_output ? "this Compact's output asks for indices only" : std::string(needs.rpc) + " writes no output";
    if (auto s = Unused(prefix, f.output, f.output_field, why.c_str()); !s.ok()) return s;
  }
  if (!needs.indices_output) {
    if (auto s = Unused(prefix, f.indices, f.indices_field, "only a Compact asking for indices writes them"); !s.ok()) {
      return s;
    }
  }
  if (!needs.flags_input) {
    if (auto s = Unused(prefix, f.flags, f.flags_field, "only a Compact with use_flags reads flags"); !s.ok()) return s;
  }
  if (needs.values_output) {
    if (auto s = Required(prefix, f.output, f.output_field, "for the kept values"); !s.ok()) return s;
  }
  if (needs.indices_output) {
    if (auto s = Required(prefix, f.indices, f.indices_field, "for the kept indices"); !s.ok()) return s;
  }
  if (needs.flags_input) {
    if (auto s = Required(prefix, f.flags, f.flags_field, "with use_flags"); !s.ok()) return s;
  }
  if (needs.scan_output && !f.output.set && f.output.offset != 0) {
    return InvalidArgument(prefix + f.output_offset_field + " " + std::to_string(f.output.offset) + ": set without " +
                   prefix + f.output_field + " (an in-place scan writes over its input)");
  }
  return grpc::Status::OK;
}

grpc::Status CheckDeclaredCount(const std::string& prefix, uint64_t bytes, size_t element_size,
                                std::optional<uint64_t> declared_count) {
  const uint64_t n = bytes / element_size;
  if (declared_count && bytes % element_size == 0 && *declared_count != n) {
    return InvalidArgument("header.element_count " + std::to_string(*declared_count) + " differs from " + prefix + "bytes " +
                   std::to_string(bytes) + " (" + std::to_string(n) + " elements)");
  }
  return grpc::Status::OK;
}

grpc::Status OpenShared(shm::RegionDir& regions, const v1::SharedMemory& h, size_t element_size,
                        const SharedNeeds& needs, std::optional<uint64_t> declared_count, uint64_t max_request_bytes,
                        SharedRanges* out) {
  RangeFields fields{Region(h.output_region(), h.output_offset()), Region(h.indices_region(), h.indices_offset()),
                     Region(h.flags_region(), h.flags_offset()),   "output_region",
                     "indices_region",                             "flags_region",
                     "output_offset"};
  if (auto s = CheckRangeFields(kSharedPrefix, fields, needs); !s.ok()) return s;
  if (max_request_bytes && h.bytes() > max_request_bytes) {
    return {grpc::StatusCode::RESOURCE_EXHAUSTED, kSharedPrefix + "bytes " + std::to_string(h.bytes()) +
                                                      " exceeds this server's limit of " +
                                                      std::to_string(max_request_bytes) + " (--max-request-bytes)"};
  }
  if (auto s = CheckDeclaredCount(kSharedPrefix, h.bytes(), element_size, declared_count); !s.ok()) return s;
  const uint64_t n = h.bytes() / element_size;
  out->elements = n;
  out->in_place = needs.scan_output && h.output_region().empty();
  if (auto s = regions.Map(kSharedPrefix + "region", h.region(), h.offset(), h.bytes(), element_size, out->in_place, &out->in,
                           h.arena());
      !s.ok()) {
    return s;
  }
  if (out->in_place) {
    out->out = out->in;
  } else if (needs.scan_output || needs.values_output) {
    if (auto s = regions.Map(kSharedPrefix + "output_region", h.output_region(), h.output_offset(), h.bytes(), element_size,
                             true, &out->out, h.arena());
        !s.ok()) {
      return s;
    }
    // A scan may name its own input range as output (in place by another name); nothing else overlaps.
    if (!(needs.scan_output && out->out.SameRange(out->in))) {
      if (auto s = Disjoint(out->out, "output_region", out->in, "region"); !s.ok()) return s;
    } else {
      out->in_place = true;
    }
  }
  if (needs.indices_output) {
    if (auto s = regions.Map(kSharedPrefix + "indices_region", h.indices_region(), h.indices_offset(), n * sizeof(int64_t),
                             sizeof(int64_t), true, &out->indices, h.arena());
        !s.ok()) {
      return s;
    }
    if (auto s = Disjoint(out->indices, "indices_region", out->in, "region"); !s.ok()) return s;
    if (auto s = Disjoint(out->indices, "indices_region", out->out, "output_region"); !s.ok()) return s;
  }
  if (needs.flags_input) {
    if (auto s = regions.Map(kSharedPrefix + "flags_region", h.flags_region(), h.flags_offset(), n, 1, false, &out->flags,
                             h.arena());
        !s.ok()) {
      return s;
    }
    if (auto s = Disjoint(out->out, "output_region", out->flags, "flags_region"); !s.ok()) return s;
    if (auto s = Disjoint(out->indices, "indices_region", out->flags, "flags_region"); !s.ok()) return s;
  }
  return grpc::Status::OK;
}

grpc::Status NoInlinePayload(uint64_t bytes, const char* field, uint64_t request_index, const char* header_field) {
  if (bytes == 0) return grpc::Status::OK;
  return InvalidArgument(std::string(field) + ": request " + std::to_string(request_index) + " carries " +
                 std::to_string(bytes) + " bytes, but a call with " + header_field + " sends no array data");
}

grpc::Status ForEachPiece(uint64_t elements, size_t element_size, const std::function<bool()>& cancelled,
                          const std::function<void(uint64_t, uint64_t)>& piece) {
  const uint64_t step = std::max<uint64_t>(1, kSharedPieceBytes / element_size);
  for (uint64_t first = 0; first < elements; first += step) {
    if (cancelled()) return {grpc::StatusCode::CANCELLED, "the call was cancelled"};
    piece(first, std::min(step, elements - first));
  }
  return grpc::Status::OK;
}

grpc::Status CheckIntact(const SharedRanges& r) {
  for (const auto& [view, field] : {std::pair{&r.in, "region"}, std::pair{&r.out, "output_region"},
                                    std::pair{&r.indices, "indices_region"}, std::pair{&r.flags, "flags_region"}}) {
    if (auto s = view->CheckIntact(kSharedPrefix + field); !s.ok()) return s;
  }
  return grpc::Status::OK;
}

}  // namespace gpuscan::server
