#include "service/lane_spec.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/text_format.h>

#include "service/status.h"

namespace gpuscan::server {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

std::string FieldText(const Message& m, const FieldDescriptor* f) {
  if (f->is_repeated()) return std::to_string(m.GetReflection()->FieldSize(m, f)) + " values";
  if (f->has_presence() && !m.GetReflection()->HasField(m, f)) return "not set";
  std::string out;
  google::protobuf::TextFormat::PrintFieldValueToString(m, f, -1, &out);
  return out.empty() ? "\"\"" : out;
}

// Depth-first over the fields both messages may set, in field-number order.
std::string Diff(const Message& a, const Message& b, const std::string& prefix, uint32_t first_lane) {
  const auto* d = a.GetDescriptor();
  const Reflection* ra = a.GetReflection();
  const Reflection* rb = b.GetReflection();
  for (int i = 0; i < d->field_count(); ++i) {
    const FieldDescriptor* f = d->field(i);
    const std::string name = prefix + "." + f->name();
    if (name == "header.lanes.lane") continue;  // the one field lanes differ in
    const bool message = f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE && !f->is_repeated();
    if (message && ra->HasField(a, f) && rb->HasField(b, f)) {
      std::string inner = Diff(ra->GetMessage(a, f), rb->GetMessage(b, f), name, first_lane);
      if (!inner.empty()) return inner;
      continue;
    }
    bool same;
    if (message) {
      same = ra->HasField(a, f) == rb->HasField(b, f);
    } else {
      const std::string ta = FieldText(a, f), tb = FieldText(b, f);
      same = ta == tb;
    }
    if (!same) {
      const std::string ta = message ? (ra->HasField(a, f) ? "set" : "not set") : FieldText(a, f);
      const std::string tb = message ? (rb->HasField(b, f) ? "set" : "not set") : FieldText(b, f);
      return name + " (" + ta + " here, " + tb + " on lanes.lane=" + std::to_string(first_lane) + ")";
    }
  }
  return {};
}

}  // namespace

std::string ArrayIdText(const std::string& id) { return HexText(id); }

grpc::Status CheckLanes(const v1::Lanes& lanes, size_t element_size, const ServerOptions& options, LaneSpec* spec) {
  auto invalid = [](const std::string& m) { return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, m); };
  if (lanes.array_id().size() != 16) {
    return invalid("header.lanes.array_id is " + std::to_string(lanes.array_id().size()) +
                   " bytes; it must be exactly 16 random bytes, the same on every lane of the array");
  }
  if (lanes.lane_count() == 0) return invalid("header.lanes.lane_count=0; it must be at least 1");
  if (lanes.lane_count() > options.max_lanes) {
    return invalid("header.lanes.lane_count=" + std::to_string(lanes.lane_count()) +
                   " is above this server's --max-lanes=" + std::to_string(options.max_lanes));
  }
  if (lanes.lane() >= lanes.lane_count()) {
    return invalid("header.lanes.lane=" + std::to_string(lanes.lane()) + " is not below header.lanes.lane_count=" +
                   std::to_string(lanes.lane_count()));
  }
  if (lanes.chunk_elements() == 0) return invalid("header.lanes.chunk_elements=0; it must be at least 1");
  if (lanes.chunk_elements() > options.chunk_bytes / element_size) {
    return invalid("header.lanes.chunk_elements=" + std::to_string(lanes.chunk_elements()) + " of " +
                   std::to_string(element_size) + "-byte elements exceeds the chunk limit of " +
                   std::to_string(options.chunk_bytes) + " bytes (at most " +
                   std::to_string(options.chunk_bytes / element_size) + " elements)");
  }
  spec->array_id = lanes.array_id();
  spec->lane = lanes.lane();
  spec->lane_count = lanes.lane_count();
  spec->chunk_elements = lanes.chunk_elements();
  spec->element_size = element_size;
  return grpc::Status::OK;
}

std::string FirstDifference(const Message& here, const Message& first, uint32_t first_lane) {
  return Diff(here, first, "header", first_lane);
}

grpc::Status EndedStatus(const std::string& id, const grpc::Status& how) {
  if (how.ok()) {
    return {grpc::StatusCode::ALREADY_EXISTS, "lanes.array_id=" + ArrayIdText(id) +
                                                  " belongs to an array that already completed; every array needs "
                                                  "a fresh random id"};
  }
  return {how.error_code(), "lanes.array_id=" + ArrayIdText(id) + " belongs to an array that already ended: " +
                                how.error_message()};
}

}  // namespace gpuscan::server
