#include "service/resident_call.h"

#include <string>

#include <fmt/format.h>

#include "service/status.h"

namespace gpuscan::server {
namespace {

grpc::Status Cannot(const char* other, const char* why) {
  return InvalidArgument(std::string("header.resident: cannot be combined with ") + other + " (" + why + ")");
}

}  // namespace

grpc::Status OpenResident(ResidentStore& store, const grpc::ServerContextBase& ctx, const v1::Resident& header,
                          int header_dtype, std::optional<uint64_t> declared_count, const ResidentConflicts& conflicts,
                          ResidentCall* call, DeviceRanges* device, const ResidentWants& wants) {
  if (auto s = OpenResidentInputs(store, ctx, header, header_dtype, declared_count, wants, conflicts, call); !s.ok()) {
    return s;
  }
  const ResidentArray& a = *call->values;
  device->in = a.memory->data();
  if (call->flags) device->flags = reinterpret_cast<uint8_t*>(call->flags->memory->data());
  if (call->keys) device->keys = call->keys->memory->data();
  if (call->sort_values) device->values = call->sort_values->memory->data();
  device->elements = a.count;
  device->engine = a.memory->engine;
  device->device = a.memory->device;
  return grpc::Status::OK;
}

grpc::Status OpenResidentInputs(ResidentStore& store, const grpc::ServerContextBase& ctx, const v1::Resident& header,
                                int header_dtype, std::optional<uint64_t> declared_count, const ResidentWants& wants,
                                const ResidentConflicts& conflicts, ResidentCall* call) {
  if (auto s = store.CheckServed(); !s.ok()) return s;
  if (conflicts.shared_memory) return Cannot("header.shared_memory", "the array is on the server already");
  if (conflicts.device_memory) return Cannot("header.device_memory", "the array is on the server already");
  if (conflicts.lanes) return Cannot("header.lanes", "one call reads the whole array");
  if (header.keep() && !conflicts.keep_allowed) {
    return InvalidArgument("header.resident.keep: this operation answers a value, not an array to keep");
  }
  if (header.values().empty()) {
    return InvalidArgument("header.resident.values: required (the id of the input array; a streamed input's "
                           "result is not kept yet)");
  }
  struct Other {
    const std::string& id;
    bool wanted;
    const char* field;
    const char* what;  // what the header asks for it by
  };
  const Other others[] = {
      {header.flags(), wants.flags, "header.resident.flags", "use_flags or heads"},
      {header.keys(), wants.keys_dtype != 0, "header.resident.keys", "key_dtype (ReduceByKey: always)"},
      {header.sort_values(), wants.sort_values_dtype != 0, "header.resident.sort_values",
       "output SORT_OUTPUT_KEYS_AND_VALUES"},
  };
  for (const Other& o : others) {
    if (o.wanted && o.id.empty()) {
      return InvalidArgument(std::string(o.field) + ": required (the header asks for it: " + o.what + ")");
    }
    if (!o.wanted && !o.id.empty()) {
      return InvalidArgument(std::string(o.field) + ": this call takes no such input (only with " + o.what + ")");
    }
  }
  if (auto s = ResidentStore::CheckLabel(header.label(), "header.resident.label"); !s.ok()) return s;
  if (auto s = TenantOf(ctx, &call->tenant); !s.ok()) return s;
  if (auto s = store.Find(call->tenant, header.values(), "header.resident.values", &call->values); !s.ok()) return s;
  const ResidentArray& a = *call->values;
  if (a.dtype != header_dtype) {
    return InvalidArgument("header.dtype " + DTypeText(header_dtype) + " differs from the resident array's " +
                           DTypeText(a.dtype) + " (header.resident.values " + HexText(a.id) + ")");
  }
  if (declared_count && *declared_count != a.count) {
    return InvalidArgument("header.element_count " + std::to_string(*declared_count) + " differs from the resident " +
                           "array's " + std::to_string(a.count) + " elements");
  }
  // The other inputs: found, of the dtype the header says, as long as the values.
  auto other = [&](const std::string& id, const char* field, std::shared_ptr<const ResidentArray>* out) {
    if (auto s = store.Find(call->tenant, id, field, out); !s.ok()) return s;
    const ResidentArray& o = **out;
    if (o.count != a.count) {
      return InvalidArgument(std::string(field) + " " + HexText(o.id) + " has " + std::to_string(o.count) +
                             " elements; header.resident.values has " + std::to_string(a.count));
    }
    if (o.memory->engine != a.memory->engine) {
      return InvalidArgument(std::string(field) + " " + HexText(o.id) + " lies on device '" + o.memory->device +
                             "', header.resident.values on '" + a.memory->device + "': one call reads one device");
    }
    return grpc::Status::OK;
  };
  if (wants.flags) {
    auto s = other(header.flags(), "header.resident.flags", &call->flags);
    if (!s.ok()) return s;
    if (WireDTypeSize(call->flags->dtype) != 1) {
      return InvalidArgument("header.resident.flags " + HexText(call->flags->id) + " is " +
                             DTypeText(call->flags->dtype) + "; flags are one byte an element (UINT8 or INT8)");
    }
  }
  if (wants.keys_dtype != 0) {
    auto s = other(header.keys(), "header.resident.keys", &call->keys);
    if (!s.ok()) return s;
    if (call->keys->dtype != wants.keys_dtype) {
      return InvalidArgument("header.resident.keys " + HexText(call->keys->id) + " is " + DTypeText(call->keys->dtype) +
                             "; header.key_dtype is " + DTypeText(wants.keys_dtype));
    }
  }
  if (wants.sort_values_dtype != 0) {
    auto s = other(header.sort_values(), "header.resident.sort_values", &call->sort_values);
    if (!s.ok()) return s;
    if (call->sort_values->dtype != wants.sort_values_dtype) {
      return InvalidArgument("header.resident.sort_values " + HexText(call->sort_values->id) + " is " +
                             DTypeText(call->sort_values->dtype) + "; header.values_dtype is " +
                             DTypeText(wants.sort_values_dtype));
    }
  }
  call->keep = header.keep();
  call->ttl_ms = header.ttl_ms();
  call->label = header.label();
  return grpc::Status::OK;
}

grpc::Status PutChecks::Header(const v1::PutArrayHeader& header, const grpc::ServerContextBase& ctx,
                               std::string* tenant) {
  if (auto s = store_.CheckServed(); !s.ok()) return s;
  size_ = WireDTypeSize(header.dtype());
  if (size_ == 0) {
    return InvalidArgument("header.dtype " + std::to_string(header.dtype()) + " (" +
                           (v1::DType_IsValid(header.dtype()) ? v1::DType_Name(header.dtype()) : "not a known DType") +
                           "): not an element type");
  }
  if (auto s = ResidentStore::CheckLabel(header.label(), "header.label"); !s.ok()) return s;
  if (auto s = TenantOf(ctx, tenant); !s.ok()) return s;
  header_ = header;
  if (header.has_element_count()) {
    const uint64_t budget = store_.options().budget_bytes;
    if (header.element_count() > budget / size_) {
      return ResourceExhausted(fmt::format("header.element_count {} ({} bytes each) is more than the resident "
                                           "budget of {} bytes (--resident-bytes)",
                                           header.element_count(), size_, budget));
    }
  }
  return grpc::Status::OK;
}

grpc::Status PutChecks::Chunk(uint64_t bytes, uint64_t index) {
  if (bytes > chunk_bytes_) {
    return ResourceExhausted(fmt::format("data of request {} has {} bytes; a chunk holds at most {} "
                                         "(Limits.max_chunk_bytes)", index, bytes, chunk_bytes_));
  }
  if (bytes % size_) {
    return InvalidArgument(fmt::format("data of request {} has {} bytes, not a multiple of the element size {} ({})",
                                       index, bytes, size_, v1::DType_Name(header_.dtype())));
  }
  arrived_ += bytes;
  if (header_.has_element_count() && arrived_ > header_.element_count() * size_) {
    return InvalidArgument(fmt::format("more elements arrived than header.element_count {}", header_.element_count()));
  }
  if (arrived_ > store_.options().budget_bytes) {
    return ResourceExhausted(fmt::format("the array passed the resident budget of {} bytes (--resident-bytes)",
                                         store_.options().budget_bytes));
  }
  return grpc::Status::OK;
}

grpc::Status PutChecks::Finish(uint64_t bytes) const {
  if (header_.has_element_count() && bytes != header_.element_count() * size_) {
    return InvalidArgument(
        fmt::format("header.element_count {} but {} elements arrived", header_.element_count(), bytes / size_));
  }
  return grpc::Status::OK;
}

grpc::Status PlanGet(const v1::GetArrayRequest& request, const ResidentArray& array, uint64_t chunk_bytes,
                     GetRange* range) {
  const uint64_t count = array.count;
  if (request.offset() > count) {
    return {grpc::StatusCode::OUT_OF_RANGE,
            fmt::format("offset {} is past the array's end ({} elements)", request.offset(), count)};
  }
  const uint64_t left = count - request.offset();
  if (request.has_count() && request.count() > left) {
    return {grpc::StatusCode::OUT_OF_RANGE, fmt::format("offset {} + count {} is past the array's end ({} elements)",
                                                        request.offset(), request.count(), count)};
  }
  const size_t size = WireDTypeSize(array.dtype);
  range->first = request.offset();
  range->end = request.offset() + (request.has_count() ? request.count() : left);
  const uint64_t chunk = request.chunk_bytes() ? std::min<uint64_t>(request.chunk_bytes(), chunk_bytes) : chunk_bytes;
  range->step = std::max<uint64_t>(1, chunk / size);
  range->element_size = size;
  return grpc::Status::OK;
}

grpc::Status CheckGetArrayMemory(const v1::GetArrayRequest& request, const GetRange& range) {
  if (request.has_shared_memory() && request.has_device_memory()) {
    return InvalidArgument("device_memory: cannot be combined with shared_memory (the range goes to one place)");
  }
  const bool shared = request.has_shared_memory();
  const std::string field = shared ? "shared_memory" : "device_memory";
  const bool out_set =
      shared ? !request.shared_memory().output_region().empty() : !request.device_memory().output_handle().empty();
  const uint64_t out_offset = shared ? request.shared_memory().output_offset() : request.device_memory().output_offset();
  if (out_set || out_offset != 0) {
    const std::string named =
        !out_set ? field + ".output_offset " + std::to_string(out_offset)
        : shared ? field + ".output_region \"" + request.shared_memory().output_region() + "\""
                 : field + ".output_handle (" + std::to_string(request.device_memory().output_handle().size()) + " bytes)";
    return InvalidArgument(named + ": GetArray writes the range at " + field + (shared ? ".region" : ".handle") +
                           " and offset; the output fields stay unset");
  }
  const uint64_t bytes = shared ? request.shared_memory().bytes() : request.device_memory().bytes();
  const uint64_t count = range.end - range.first, want = count * range.element_size;
  if (bytes != want) {
    return InvalidArgument(fmt::format("{}.bytes {} differs from the range's {} bytes ({} elements of {} bytes from offset {})",
                                       field, bytes, want, count, range.element_size, range.first));
  }
  return grpc::Status::OK;
}

grpc::Status GetArrayFieldNames(const grpc::Status& s) {
  std::string m = s.error_message();
  for (const char* header_field : {"header.shared_memory", "header.device_memory"}) {
    for (size_t at = m.find(header_field); at != std::string::npos; at = m.find(header_field, at)) m.erase(at, 7);
  }
  return {s.error_code(), m};
}

grpc::Status ResidentOutput(ResidentStore& store, const ResidentCall& call, uint64_t bytes,
                            std::shared_ptr<engine::ResidentMemory>* out) {
  if (call.keep) return store.Allocate(call.tenant, bytes, out, call.values->memory.get());
  // Scratch on the input's device, outside the budget: the call's working space.
  try {
    *out = call.values->memory->engine->AllocateResident(std::max<uint64_t>(bytes, 1));
  } catch (const engine::Error& e) {
    return ToStatus(e);
  }
  return grpc::Status::OK;
}

}  // namespace gpuscan::server
