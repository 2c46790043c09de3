// The request fuzzer's operations of several inputs on resident arrays: Compact, Histogram,
// Scan2D, SegmentedScan, ReduceByKey and Sort with header.resident. What the handlers check
// (ToEngine, then OpenResidentInputs with the header's WantsOf), then that an accepted call's
// inputs go together, then the streamed call of the same arrays' bytes (FuzzCall: the engine
// against the references), which a resident call answers bit for bit. Short ids (at most one
// byte) name arrays the fuzzer puts first: values from request #0's data, the flags, keys or
// sort values from its second stream, each of the dtype that byte names (empty: the header's).
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "request_fuzz_common.h"
#include "request_fuzz_store.h"
#include "service/resident_call.h"
#include "service/validate.h"

namespace gpuscan::fuzz {
namespace {

constexpr uint32_t kMaxBins = 4096;      // as request_fuzz_calls.cc's limits
constexpr uint64_t kMaxRowBytes = 4096;

// The handlers' header checks, one a header type (narrow dtypes taken, as the handlers take them).
template <class Spec, class H, class... Limit>
grpc::Status ValidateAs(const H& h, Limit... limit) {
  Spec spec;
  std::optional<server::NarrowInput> n;
  return server::ToEngine(h, limit..., &spec, &n);
}
grpc::Status Validate(const v1::CompactHeader& h) { return ValidateAs<engine::CompactSpec>(h); }
grpc::Status Validate(const v1::HistogramHeader& h) { return ValidateAs<engine::HistogramSpec>(h, kMaxBins); }
grpc::Status Validate(const v1::Scan2DHeader& h) { return ValidateAs<engine::Scan2DSpec>(h, kMaxRowBytes); }
grpc::Status Validate(const v1::SegmentedScanHeader& h) { return ValidateAs<engine::SegmentedScanSpec>(h); }
grpc::Status Validate(const v1::ReduceByKeyHeader& h) { return ValidateAs<engine::SegmentedScanSpec>(h); }
grpc::Status Validate(const v1::SortHeader& h) {
  engine::SortSpec spec;
  std::optional<server::NarrowInput> keys, values;
  return server::ToEngine(h, &spec, &keys, &values);
}

// What else the header sets (the fields a header type lacks are false), as the handlers say it.
template <class H>
server::ResidentConflicts ConflictsOf(const H& h, bool keep_allowed) {
  server::ResidentConflicts c;
  if constexpr (std::is_same_v<H, v1::CompactHeader>) c.shared_memory = h.has_shared_memory();
  if constexpr (std::is_same_v<H, v1::CompactHeader>) c.lanes = h.has_lanes();
  if constexpr (!std::is_same_v<H, v1::Scan2DHeader> && !std::is_same_v<H, v1::ReduceByKeyHeader>) {
    c.device_memory = h.has_device_memory();
  }
  c.keep_allowed = keep_allowed;
  return c;
}

// The element count the header declares (Scan2D: rows x cols, when rows is set and that fits).
template <class H>
std::optional<uint64_t> Declared(const H& h) {
  if constexpr (std::is_same_v<H, v1::Scan2DHeader>) {
    if (!h.has_rows() || (h.cols() && h.rows() > UINT64_MAX / h.cols())) return std::nullopt;
    return h.rows() * h.cols();
  } else {
    return DeclaredCount(h);
  }
}

// The second input's dtype when its id is empty: what the header asks for.
int DefaultDType(const server::ResidentWants& w) {
  if (w.flags) return v1::DTYPE_UINT8;
  if (w.keys_dtype) return w.keys_dtype;
  if (w.sort_values_dtype) return w.sort_values_dtype;
  return v1::DTYPE_UINT8;
}

// An id of one byte, or an empty one where the header asks for the input, becomes an array put
// from `content`; others stay as the input gave them.
void PutShort(server::ResidentStore& store, std::string* id, bool wanted, int default_dtype, std::string content) {
  if (id->size() > 1 || (id->empty() && !wanted) || !store.CheckServed().ok()) return;
  const int dtype = id->empty() ? default_dtype : AnyDType(uint8_t((*id)[0]));
  if (!server::WireDTypeSize(dtype)) return;
  if (auto info = PutDirect(store, dtype, &content)) *id = info->id();
}

std::string ReadAll(const server::ResidentArray& a) {
  std::string bytes(a.count * server::WireDTypeSize(a.dtype), '\0');
  if (!bytes.empty()) a.memory->Read(0, bytes.data(), bytes.size());
  return bytes;
}

template <class H>
Result FuzzInputs(int rpc, server::ResidentStore& store, const std::vector<Request>& requests, uint64_t chunk_bytes) {
  if (requests.empty() || !requests[0].has_header || !ParseHeader<H>(requests[0].header).has_resident()) {
    return FuzzCall(rpc, requests, chunk_bytes, 0, 0);  // the streamed call
  }
  H h = ParseHeader<H>(requests[0].header);
  v1::Resident& r = *h.mutable_resident();
  r.set_ttl_ms(PinTtl(r.ttl_ms()));
  const server::ResidentWants wants = server::WantsOf(h);
  PutShort(store, r.mutable_values(), true, h.dtype(), requests[0].data);
  PutShort(store, r.mutable_flags(), wants.flags, v1::DTYPE_UINT8, requests[0].flags);
  PutShort(store, r.mutable_keys(), wants.keys_dtype != 0, DefaultDType(wants), requests[0].flags);
  PutShort(store, r.mutable_sort_values(), wants.sort_values_dtype != 0, DefaultDType(wants), requests[0].flags);
  constexpr bool kKeeps = !std::is_same_v<H, v1::HistogramHeader>;
  server::ResidentCall call;
  grpc::Status st = Validate(h);
  if (st.ok()) {
    st = server::OpenResidentInputs(store, NoCall(), h.resident(), h.dtype(), Declared(h), wants,
                                    ConflictsOf(h, kKeeps), &call);
  }
  // Request #0's data became the arrays; later requests' data is refused.
  for (uint64_t i = 1; st.ok() && i < requests.size(); ++i) {
    st = server::CheckHeaderPlacement(i, requests[i].has_header);
    if (st.ok()) st = server::NoInlinePayload(requests[i].data.size(), "data", i, "header.resident");
    if (st.ok()) st = server::NoInlinePayload(requests[i].flags.size(), "data", i, "header.resident");
  }
  if (!st.ok()) {
    CheckResidentRejected(st);
    return {st, 0};
  }
  // Accepted: the inputs the header asks for, and only those, of its dtypes and one length.
  const server::ResidentArray& v = *call.values;
  auto expect = [&](const std::shared_ptr<const server::ResidentArray>& a, bool wanted, int dtype, const char* what) {
    if (bool(a) != wanted) Fail(std::string("resident ") + what + (wanted ? " wanted but not opened" : " opened unasked"));
    if (!a) return;
    const bool dtype_ok = dtype ? a->dtype == dtype : server::WireDTypeSize(a->dtype) == 1;
    if (!dtype_ok || a->count != v.count) {
      Fail(std::string("resident ") + what + " accepted with dtype " + std::to_string(a->dtype) + " and " +
           std::to_string(a->count) + " elements; the values have " + std::to_string(v.count));
    }
  };
  if (v.dtype != h.dtype() || (Declared(h) && *Declared(h) != v.count)) {
    Fail("resident values accepted of another dtype or count than the header says");
  }
  expect(call.flags, wants.flags, 0, "flags");
  expect(call.keys, wants.keys_dtype != 0, wants.keys_dtype, "keys");
  expect(call.sort_values, wants.sort_values_dtype != 0, wants.sort_values_dtype, "sort_values");
  // The streamed call of the same bytes: what the resident call answers.
  Request streamed;
  streamed.has_header = true;
  h.clear_resident();
  streamed.header = h.SerializeAsString();
  streamed.data = ReadAll(v);
  for (const auto& a : {call.flags, call.keys, call.sort_values}) {
    if (a) streamed.flags = ReadAll(*a);
  }
  const Result same =
      FuzzCall(rpc, {streamed}, std::max<uint64_t>(chunk_bytes, streamed.data.size() + 1), 0, uint64_t{4} << 30);
  return {st, same.elements};
}

}  // namespace

Result FuzzResidentInputs(int rpc, server::ResidentStore& store, const std::vector<Request>& requests,
                          uint64_t chunk_bytes) {
  switch (rpc) {
    case 2: return FuzzInputs<v1::CompactHeader>(rpc, store, requests, chunk_bytes);
    case 3: return FuzzInputs<v1::HistogramHeader>(rpc, store, requests, chunk_bytes);
    case 4: return FuzzInputs<v1::Scan2DHeader>(rpc, store, requests, chunk_bytes);
    case 5: return FuzzInputs<v1::SegmentedScanHeader>(rpc, store, requests, chunk_bytes);
    case 6: return FuzzInputs<v1::ReduceByKeyHeader>(rpc, store, requests, chunk_bytes);
    default: return FuzzInputs<v1::SortHeader>(rpc, store, requests, chunk_bytes);
  }
}

}  // namespace gpuscan::fuzz
