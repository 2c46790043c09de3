#include "service/resident_call.h"

#include <string>

#include "service/status.h"

namespace gpuscan::server {
namespace {

grpc::Status Cannot(const char* other, const char* why) {
  return InvalidArgument(std::string("header.resident: cannot be combined with ") + other + " (" + why + ")");
}

}  // namespace

grpc::Status OpenResident(ResidentStore& store, const grpc::ServerContextBase& ctx, const v1::Resident& header,
                          int header_dtype, std::optional<uint64_t> declared_count, const ResidentConflicts& conflicts,
                          ResidentCall* call, DeviceRanges* device) {
  if (auto s = store.CheckServed(); !s.ok()) return s;
  if (conflicts.shared_memory) return Cannot("header.shared_memory", "the array is on the server already");
  if (conflicts.device_memory) return Cannot("header.device_memory", "the array is on the server already");
  if (conflicts.lanes) return Cannot("header.lanes", "one call reads the whole array");
  if (conflicts.narrow) {
    return InvalidArgument("header.resident: narrow dtypes (" + v1::DType_Name(static_cast<v1::DType>(header_dtype)) +
                           ") are not computed on resident arrays yet; Put and Get take them");
  }
  if (header.keep() && !conflicts.keep_allowed) {
    return InvalidArgument("header.resident.keep: this operation answers a value, not an array to keep");
  }
  if (header.values().empty()) {
    return InvalidArgument("header.resident.values: required (the id of the input array; a streamed input's "
                           "result is not kept yet)");
  }
  if (auto s = ResidentStore::CheckLabel(header.label(), "header.resident.label"); !s.ok()) return s;
  if (auto s = TenantOf(ctx, &call->tenant); !s.ok()) return s;
  if (auto s = store.Find(call->tenant, header.values(), "header.resident.values", &call->values); !s.ok()) return s;
  const ResidentArray& a = *call->values;
  if (a.dtype != header_dtype) {
    return InvalidArgument("header.dtype " + v1::DType_Name(static_cast<v1::DType>(header_dtype)) +
                           " differs from the resident array's " + v1::DType_Name(static_cast<v1::DType>(a.dtype)) +
                           " (header.resident.values " + HexText(a.id) + ")");
  }
  if (declared_count && *declared_count != a.count) {
    return InvalidArgument("header.element_count " + std::to_string(*declared_count) + " differs from the resident " +
                           "array's " + std::to_string(a.count) + " elements");
  }
  call->keep = header.keep();
  call->ttl_ms = header.ttl_ms();
  call->label = header.label();
  device->in = a.memory->data();
  device->elements = a.count;
  device->engine = a.memory->engine;
  device->device = a.memory->device;
  return grpc::Status::OK;
}

grpc::Status ResidentOutput(ResidentStore& store, const ResidentCall& call, uint64_t bytes,
                            std::shared_ptr<engine::ResidentMemory>* out) {
  if (call.keep) return store.Allocate(call.tenant, bytes, out);
  // Scratch on the input's device, outside the budget: the call's working space.
  try {
    *out = call.values->memory->engine->AllocateResident(std::max<uint64_t>(bytes, 1));
  } catch (const engine::Error& e) {
    return ToStatus(e);
  }
  return grpc::Status::OK;
}

}  // namespace gpuscan::server
