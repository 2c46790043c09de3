// The request fuzzer's resident-array calls (PutArray, GetArray, DropArray, ListArrays, Scan and
// Reduce with header.resident): the handlers' checks, then the store and the CPU engine against
// the bytes put and the references (request_fuzz_target.h lists the invariants).
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <grpcpp/server_context.h>

#include "canonical_reference.h"
#include "gpuscan/v1/gpuscan.pb.h"
#include "request_fuzz_calls.h"
#include "request_fuzz_common.h"
#include "request_fuzz_store.h"
#include "service/resident_call.h"
#include "service/resident_store.h"
#include "service/shared_memory.h"
#include "service/validate.h"

namespace gpuscan::fuzz {

// The caller: a server context of no call (no metadata, no TLS peer): the default tenant.
const grpc::ServerContextBase& NoCall() {
  static grpc::ServerContext* ctx = new grpc::ServerContext();  // never destroyed, as Engine()
  return *ctx;
}

uint64_t PinTtl(uint64_t ttl_ms) { return ttl_ms && ttl_ms < 60000 ? ttl_ms + 60000 : ttl_ms; }

// A rejected resident call: the codes the resident checks give, and a message naming a field.
void CheckResidentRejected(const grpc::Status& s) {
  const auto code = s.error_code();
  if (code != grpc::StatusCode::INVALID_ARGUMENT && code != grpc::StatusCode::RESOURCE_EXHAUSTED &&
      code != grpc::StatusCode::UNIMPLEMENTED && code != grpc::StatusCode::NOT_FOUND &&
      code != grpc::StatusCode::OUT_OF_RANGE) {
    Fail("resident call rejected with unexpected code " + std::to_string(int(code)) + ": " + s.error_message());
  }
  const std::string& m = s.error_message();
  if (m.empty()) Fail("resident call rejected with an empty message (code " + std::to_string(int(code)) + ")");
  static const char* const kFields[] = {"header",         "request #", "data of request", "data:",
                                        "id ",            "offset ",   "--resident-bytes", "--tenant-quota-bytes",
                                        "empty stream",   "shared_memory", "device_memory"};
  if (std::none_of(std::begin(kFields), std::end(kFields), [&](const char* f) { return m.find(f) != std::string::npos; })) {
    Fail("the resident call's message names no field: " + m);
  }
}

namespace {

// ---------------------------------------------------------------------------------------------
// Resident arrays (issue 56): PutArray, GetArray, DropArray, ListArrays and Scan's and Reduce's
// header.resident, through the handlers' own checks (resident_call.h: PutChecks, PlanGet,
// OpenResident) on a ResidentStore of the input's own over the CPU engine, then what the calls
// would answer against what was put. Ids the input cannot know: an id of at most one byte (a
// resident values id, a GetArray/DropArray id) names an array the fuzzer puts first (its dtype
// from that byte), so the calls that need one are reachable. TTLs below a minute are raised by a
// minute (the sweeper's clock is no part of the input). At the end every array is dropped, and
// the store must account for no bytes. PutArrayHeader's and GetArrayRequest's shared_memory and
// device_memory go through the handlers' checks of those fields (OpenShared, OpenDevice,
// CheckGetArrayMemory, GetArrayFieldNames) on a server with both off, so a call naming either is
// never accepted: refused naming a field, or FAILED_PRECONDITION as memory that is off; a
// GetArray's refusal never names a header (seeds: resident_seeds.cc, WriteResidentMemorySeeds).

// The array `info` names holds exactly `bytes`, as `info` says.
void ExpectHeld(server::ResidentStore& store, const std::string& tenant, const v1::ArrayInfo& info,
                const std::string& bytes, const std::string& what) {
  const size_t size = server::WireDTypeSize(info.dtype());
  if (info.id().size() != server::ResidentStore::kIdBytes || size == 0 || info.bytes() != bytes.size() ||
      info.element_count() * size != bytes.size()) {
    Fail(what + ": ArrayInfo says " + std::to_string(info.element_count()) + " elements, " +
         std::to_string(info.bytes()) + " bytes, an id of " + std::to_string(info.id().size()) + " bytes; " +
         std::to_string(bytes.size()) + " bytes were put");
  }
  std::shared_ptr<const server::ResidentArray> a;
  if (const grpc::Status s = store.Find(tenant, info.id(), "id", &a); !s.ok()) {
    Fail(what + ": the array just made is not found: " + s.error_message());
  }
  std::string got(bytes.size(), '\0');
  if (!bytes.empty()) a->memory->Read(0, got.data(), got.size());
  if (got != bytes || a->count != info.element_count() || a->dtype != info.dtype()) {
    Fail(what + ": the array holds other bytes than were put");
  }
}

}  // namespace

// An array put straight into the store (no call): `bytes` cut to whole elements of dtype and to
// the budget; nullopt where the store refuses it (no budget, the budget or quota spent).
std::optional<v1::ArrayInfo> PutDirect(server::ResidentStore& store, int dtype, std::string* bytes) {
  const size_t size = server::WireDTypeSize(dtype);
  const uint64_t budget = store.options().budget_bytes;
  bytes->resize(std::min<uint64_t>(bytes->size(), budget) / size * size);
  std::shared_ptr<engine::ResidentMemory> memory;
  const grpc::Status s = store.Allocate("", bytes->size(), &memory);
  if (!s.ok()) {
    CheckResidentRejected(s);
    return std::nullopt;
  }
  if (!bytes->empty()) memory->Write(0, bytes->data(), bytes->size());
  const v1::ArrayInfo info = store.Add("", dtype, bytes->size() / size, std::move(memory), 0, "fuzz");
  ExpectHeld(store, "", info, *bytes, "an array put by the fuzzer");
  return info;
}

// A dtype every array may have (narrow ones too), from one byte.
int AnyDType(uint8_t b) { return 1 + b % 11; }

namespace {

// The caller's memory of a PutArray or GetArray (shared_memory, device_memory), as on a server
// with neither --shm-dir nor --allow-device-ipc: the checks of the fields themselves run (the
// handlers' OpenShared / OpenDevice, and GetArray's CheckGetArrayMemory), and what passes them is
// FAILED_PRECONDITION (the memory is off), never an array put or a range read.
server::shm::RegionDir& RegionsOff() {
  static server::shm::RegionDir* dir = server::shm::RegionDir::Disabled().release();  // never destroyed
  return *dir;
}
server::IpcHandles& DeviceIpcOff() {
  static server::IpcHandles* handles = new server::IpcHandles(nullptr, false);
  return *handles;
}
// The message of a call refused because its memory is off (the end of every such call here).
bool MemoryOff(const grpc::Status& s) {
  const std::string& m = s.error_message();
  return s.error_code() == grpc::StatusCode::FAILED_PRECONDITION &&
         (m.find("shared memory is off on this server") != std::string::npos ||
          m.find("this server does not open device memory") != std::string::npos);
}
grpc::Status OpenMemory(const v1::SharedMemory& shm, const v1::DeviceMemory* device, bool both, size_t element_size,
                        const server::SharedNeeds& needs, std::optional<uint64_t> count) {
  if (device) {
    server::DeviceRanges ranges;
    return server::OpenDevice(DeviceIpcOff(), "unix:fuzz", *device, both, element_size, needs, count, &ranges);
  }
  server::SharedRanges ranges;
  return server::OpenShared(RegionsOff(), shm, element_size, needs, count, 0, &ranges);
}
// A refusal of a call with caller memory: a field named, or the memory off; never accepted.
void CheckMemoryRejected(const grpc::Status& st, const char* rpc) {
  if (st.ok()) Fail(std::string(rpc) + " with caller memory accepted on a server without it");
  if (!MemoryOff(st)) CheckResidentRejected(st);
}

Result FuzzPutArray(server::ResidentStore& store, const std::vector<Request>& requests, uint64_t chunk_bytes) {
  grpc::Status st = requests.empty() ? server::EmptyStreamStatus() : grpc::Status::OK;
  server::PutChecks checks(store, chunk_bytes);
  std::string tenant, data;
  std::shared_ptr<engine::ResidentMemory> memory;
  for (uint64_t i = 0; st.ok() && i < requests.size(); ++i) {
    const Request& r = requests[i];
    st = server::CheckHeaderPlacement(i, r.has_header);
    if (st.ok() && i == 0) {
      auto h = ParseHeader<v1::PutArrayHeader>(r.header);
      h.set_ttl_ms(PinTtl(h.ttl_ms()));
      st = checks.Header(h, NoCall(), &tenant);
      // The handler's OnHeader: the caller's memory, when the array comes from there.
      if (st.ok() && (h.has_shared_memory() || h.has_device_memory())) {
        server::SharedNeeds needs;
        needs.rpc = "PutArray";
        st = OpenMemory(h.shared_memory(), h.has_device_memory() ? &h.device_memory() : nullptr, h.has_shared_memory(),
                        checks.element_size(), needs,
                        h.has_element_count() ? std::optional<uint64_t>(h.element_count()) : std::nullopt);
        CheckMemoryRejected(st, "PutArray");
        return {st, 0};
      }
      // The handler's Open: a declared count's memory, taken once the call is admitted.
      if (st.ok() && h.has_element_count()) {
        st = store.Allocate(tenant, h.element_count() * checks.element_size(), &memory);
      }
    }
    if (st.ok()) st = checks.Chunk(r.data.size(), i);
    if (st.ok()) data += r.data;
  }
  if (st.ok()) st = checks.Finish(data.size());
  if (st.ok() && !memory) st = store.Allocate(tenant, data.size(), &memory);
  if (!st.ok()) {
    CheckResidentRejected(st);
    return {st, 0};
  }
  const v1::PutArrayHeader& h = checks.header();
  const size_t size = checks.element_size();
  if (!data.empty()) memory->Write(0, data.data(), data.size());
  const v1::ArrayInfo info = store.Add(tenant, h.dtype(), data.size() / size, std::move(memory), h.ttl_ms(), h.label());
  ExpectHeld(store, tenant, info, data, "PutArray " + v1::DType_Name(h.dtype()));
  const uint64_t cap = static_cast<uint64_t>(store.options().max_ttl.count());
  if (info.ttl_ms() != (h.ttl_ms() == 0 || h.ttl_ms() > cap ? cap : h.ttl_ms()) || info.label() != h.label()) {
    Fail("PutArray: ArrayInfo's ttl_ms " + std::to_string(info.ttl_ms()) + " or label differs from the header's");
  }
  return {st, data.size() / size};
}

// GetArray's or DropArray's id: a short one names an array the fuzzer puts from the requests' data.
std::string ResidentId(server::ResidentStore& store, const std::string& id, const std::vector<Request>& requests,
                       std::string* content, bool* made) {
  *made = false;
  if (id.size() > 1 || !store.CheckServed().ok()) return id;
  for (const Request& r : requests) *content += r.data;
  const auto info = PutDirect(store, id.empty() ? int(v1::DTYPE_INT32) : AnyDType(uint8_t(id[0])), content);
  if (!info) return id;
  *made = true;
  return info->id();
}

Result FuzzGetArray(server::ResidentStore& store, const std::vector<Request>& requests, uint64_t chunk_bytes) {
  auto req = ParseHeader<v1::GetArrayRequest>(requests.empty() ? std::string() : requests[0].header);
  std::string content;
  bool made = false;
  req.set_id(ResidentId(store, req.id(), requests, &content, &made));
  std::shared_ptr<const server::ResidentArray> a;
  grpc::Status st = store.Find("", req.id(), "id", &a);
  server::GetRange range;
  if (st.ok()) st = server::PlanGet(req, *a, chunk_bytes, &range);
  if (!st.ok()) {
    CheckResidentRejected(st);
    if (made && st.error_code() != grpc::StatusCode::OUT_OF_RANGE) Fail("GetArray of a put array: " + st.error_message());
    return {st, 0};
  }
  if (req.has_shared_memory() || req.has_device_memory()) {  // GetReactor::CopyOut
    server::SharedNeeds needs;
    needs.scan_output = true;
    needs.rpc = "GetArray";
    st = server::CheckGetArrayMemory(req, range);
    if (st.ok()) {
      st = OpenMemory(req.shared_memory(), req.has_device_memory() ? &req.device_memory() : nullptr,
                      req.has_shared_memory(), range.element_size, needs, range.end - range.first);
    }
    st = server::GetArrayFieldNames(st);
    CheckMemoryRejected(st, "GetArray");
    // GetArrayRequest has no header: its refusals name the request's own fields.
    if (st.error_message().find("header.") != std::string::npos) Fail("GetArray's refusal names a header: " + st.error_message());
    return {st, 0};
  }
  const size_t size = server::WireDTypeSize(a->dtype);
  const uint64_t want_end = req.has_count() ? req.offset() + req.count() : a->count;
  const uint64_t limit = std::max<uint64_t>(size, req.chunk_bytes() ? std::min(req.chunk_bytes(), chunk_bytes) : chunk_bytes);
  if (range.first != req.offset() || range.end != want_end || range.end > a->count || range.step == 0 ||
      range.step * size > limit) {
    Fail("GetArray: range [" + std::to_string(range.first) + ", " + std::to_string(range.end) + ") step " +
         std::to_string(range.step) + " for offset " + std::to_string(req.offset()) + " of " +
         std::to_string(a->count) + " elements");
  }
  // The responses, as GetReactor::Next reads them (one, empty, for an empty range).
  std::string got;
  uint64_t next = range.first;
  do {
    const uint64_t n = std::min(range.step, range.end - next);
    std::string piece(n * size, '\0');
    if (n) a->memory->Read(next * size, piece.data(), piece.size());
    got += piece;
    next += n;
  } while (next < range.end);
  if (got != content.substr(range.first * size, (range.end - range.first) * size)) {
    Fail("GetArray: the range read back differs from the bytes put");
  }
  return {st, range.end - range.first};
}

Result FuzzDropArray(server::ResidentStore& store, const std::vector<Request>& requests) {
  auto req = ParseHeader<v1::DropArrayRequest>(requests.empty() ? std::string() : requests[0].header);
  std::string content;
  bool made = false;
  req.set_id(ResidentId(store, req.id(), requests, &content, &made));
  v1::ArrayInfo info;
  const grpc::Status st = store.Drop("", req.id(), &info);
  if (!st.ok()) {
    CheckResidentRejected(st);
    if (made) Fail("DropArray of a put array: " + st.error_message());
    return {st, 0};
  }
  std::shared_ptr<const server::ResidentArray> a;
  if (info.id() != req.id() || store.Find("", req.id(), "id", &a).error_code() != grpc::StatusCode::NOT_FOUND) {
    Fail("DropArray: the array is still found, or the info names another");
  }
  return {st, info.element_count()};
}

// ListArrays: one array a request (its data, the dtype from its header's first byte), then the list.
Result FuzzListArrays(server::ResidentStore& store, const std::vector<Request>& requests) {
  grpc::Status st = store.CheckServed();
  if (!st.ok()) {
    CheckResidentRejected(st);
    return {st, 0};
  }
  std::vector<v1::ArrayInfo> put;
  uint64_t bytes = 0;
  for (const Request& r : requests) {
    std::string data = r.data;
    const int dtype = r.header.empty() ? int(v1::DTYPE_UINT8) : AnyDType(uint8_t(r.header[0]));
    if (auto info = PutDirect(store, dtype, &data)) {
      put.push_back(*info);
      bytes += info->bytes();
    }
  }
  v1::ListArraysResponse list;
  (void)store.List("", 0, "", &list);
  if (list.arrays_size() != static_cast<int>(put.size()) || list.tenant_bytes() != bytes || list.used_bytes() != bytes ||
      list.budget_bytes() != store.options().budget_bytes ||
      list.tenant_quota_bytes() != store.options().tenant_quota_bytes) {
    Fail("ListArrays: " + std::to_string(list.arrays_size()) + " arrays of " + std::to_string(list.tenant_bytes()) +
         " bytes (used " + std::to_string(list.used_bytes()) + "); " + std::to_string(put.size()) + " of " +
         std::to_string(bytes) + " were put");
  }
  for (size_t i = 0; i < put.size(); ++i) {
    const v1::ArrayInfo& a = list.arrays(static_cast<int>(i));
    if (a.id() != put[i].id() || a.bytes() != put[i].bytes() || a.dtype() != put[i].dtype()) {
      Fail("ListArrays: array " + std::to_string(i) + " is not the " + std::to_string(i) + "th put (oldest first)");
    }
  }
  return {st, put.size()};
}

// Scan's or Reduce's header.resident: the handler's OnHeader (ToEngine, NarrowStreamedOnly, the
// scan algorithm, OpenResident), data refused, then the engine on the array where it lies
// (ProcessDevice, as the handlers) against the reference. A header without `resident` is the
// streamed call's (FuzzScan, FuzzReduce).
template <bool kScan>
Result FuzzResidentOp(server::ResidentStore& store, const std::vector<Request>& requests, uint64_t chunk_bytes) {
  using Header = std::conditional_t<kScan, v1::ScanHeader, v1::ReduceHeader>;
  using Spec = std::conditional_t<kScan, engine::ScanSpec, engine::ReduceSpec>;
  const char* rpc = kScan ? "Scan" : "Reduce";
  if (requests.empty() || !requests[0].has_header || !ParseHeader<Header>(requests[0].header).has_resident()) {
    return FuzzCall(kScan ? 0 : 1, requests, chunk_bytes, 0, 0);  // FuzzScan, FuzzReduce
  }
  Header h = ParseHeader<Header>(requests[0].header);
  h.mutable_resident()->set_ttl_ms(PinTtl(h.resident().ttl_ms()));
  // The array: request #0's data, when the values id is short.
  bool made = false;
  if (h.resident().values().size() <= 1 && store.CheckServed().ok()) {
    const std::string& v = h.resident().values();
    const int dtype = v.empty() ? int(h.dtype()) : AnyDType(uint8_t(v[0]));
    std::string content = requests[0].data;
    Spec spec;
    if (server::WireDTypeSize(dtype) && server::ToEngine(h, &spec).ok() && server::ToWire(spec.dtype) == dtype) {
      if constexpr (!kScan) {  // float sums and products: data every association gives exactly
        engine::Visit(spec.dtype, spec.op, [&](auto t, auto o) {
          using T = typename decltype(t)::type;
          std::vector<T> x = Elements<T>(content);
          int scaled = 0;
          TameForReduce<T, typename decltype(o)::type>(x, scaled);
          content.assign(reinterpret_cast<const char*>(x.data()), x.size() * sizeof(T));
        });
      }
    }
    if (server::WireDTypeSize(dtype)) {
      if (auto info = PutDirect(store, dtype, &content)) {
        h.mutable_resident()->set_values(info->id());
        made = true;
      }
    }
  }
  Spec spec;
  std::optional<server::NarrowInput> narrow;
  server::ResidentCall call;
  server::DeviceRanges device;
  grpc::Status st = server::ToEngine(h, &spec, &narrow);
  if (st.ok()) st = server::NarrowStreamedOnly(narrow, h.has_shared_memory(), h.has_device_memory());
  if constexpr (kScan) {
    if (st.ok()) st = server::CheckScanAlgorithm(spec.algorithm, Engine().scan_algorithms(), Engine().name());
  }
  if (st.ok()) {
    const server::ResidentConflicts conflicts{h.has_shared_memory(), h.has_device_memory(), h.has_lanes(), kScan};
    st = server::OpenResident(store, NoCall(), h.resident(), h.dtype(), DeclaredCount(h), conflicts, &call, &device);
  }
  for (uint64_t i = 0; st.ok() && i < requests.size(); ++i) {
    st = server::CheckHeaderPlacement(i, requests[i].has_header);
    const uint64_t inline_bytes = i == 0 && made ? 0 : requests[i].data.size();  // #0's data is the array
    if (st.ok()) st = server::NoInlinePayload(inline_bytes, "data", i, "header.resident");
  }
  if (!st.ok()) {
    CheckResidentRejected(st);
    return {st, 0};
  }
  // A narrow array goes to the handler's streamed path (ResidentFeed), whose narrow input this
  // fuzzer's streamed calls do not reach (the integration tests compare it with the streamed call).
  if (narrow) return {st, device.elements};
  const uint64_t n = device.elements;
  std::string x_bytes(n * engine::SizeOf(spec.dtype), '\0');
  if (n) call.values->memory->Read(0, x_bytes.data(), x_bytes.size());
  engine::StageTimes times;
  engine::Visit(spec.dtype, spec.op, [&](auto t, auto o) {
    using T = typename decltype(t)::type;
    using Op = typename decltype(o)::type;
    const std::vector<T> x = Elements<T>(x_bytes);
    const std::string what = std::string("resident ") + rpc + " " + std::string(engine::Name(spec.op)) + " " +
                             std::string(engine::Name(spec.dtype)) + " of " + std::to_string(n) + " elements";
    if constexpr (kScan) {
      std::shared_ptr<engine::ResidentMemory> out;
      st = server::ResidentOutput(store, call, x_bytes.size(), &out);
      if (!st.ok()) return CheckResidentRejected(st);  // keep past the budget
      const auto session = OpenSession(rpc, [&] { return device.engine->NewScan(spec); });
      if (n) session->ProcessDevice(device.in, out->data(), n, times);
      std::string y(x_bytes.size(), '\0');
      if (n) out->Read(0, y.data(), y.size());
      const bool canonical = session->algorithm() == "deterministic";
      ExpectSame(Elements<T>(y),
                 canonical ? testing::CanonicalScanRef<T, Op>(x, spec.exclusive) : testing::ScanRef<T, Op>(x, spec.exclusive),
                 what);
      if (call.keep) {
        const v1::ArrayInfo kept = store.Add(call.tenant, h.dtype(), n, std::move(out), call.ttl_ms, call.label);
        ExpectHeld(store, call.tenant, kept, y, what + ", kept");
      }
    } else {
      const auto session = OpenSession(rpc, [&] { return device.engine->NewReduce(spec); });
      if (n) session->ProcessDevice(device.in, n, times);
      T got;
      session->Result(&got);
      const T want =
          session->algorithm() == "deterministic" ? testing::CanonicalReduceRef<T, Op>(x) : testing::ReduceRef<T, Op>(x);
      ExpectSame(std::vector<T>{got}, std::vector<T>{want}, what);
    }
  });
  return {st, n};
}

Result FuzzResidentKind(int kind, server::ResidentStore& store, const std::vector<Request>& requests,
                        uint64_t chunk_bytes) {
  switch (kind) {
    case 0: return FuzzPutArray(store, requests, chunk_bytes);
    case 1: return FuzzGetArray(store, requests, chunk_bytes);
    case 2: return FuzzDropArray(store, requests);
    case 3: return FuzzListArrays(store, requests);
    case 4: return FuzzResidentOp<true>(store, requests, chunk_bytes);
    case 5: return FuzzResidentOp<false>(store, requests, chunk_bytes);
    case 12: return FuzzPipeline(store, requests, chunk_bytes);  // request_fuzz_pipeline.cc
    case 13: return FuzzPipelinePlan(requests);
    default: return FuzzResidentInputs(kind - 4, store, requests, chunk_bytes);  // 6..11: rpc 2..7
  }
}

}  // namespace

Result FuzzResidentCall(int kind, const std::vector<Request>& requests, uint64_t chunk_bytes, uint64_t budget_bytes,
                        uint64_t tenant_quota_bytes) {
  server::ResidentOptions options;
  options.budget_bytes = budget_bytes;
  options.tenant_quota_bytes = tenant_quota_bytes;
  server::ResidentStore store(&Engine(), options);
  const Result r = FuzzResidentKind(kind, store, requests, chunk_bytes);
  // Every array dropped (the calls' holds have ended): the budget must be whole again.
  v1::ListArraysResponse list;
  if (store.CheckServed().ok()) (void)store.List("", 0, "", &list);
  for (const v1::ArrayInfo& a : list.arrays()) {
    v1::ArrayInfo info;
    if (!store.Drop("", a.id(), &info).ok()) Fail("a listed array could not be dropped");
  }
  if (store.arrays() != 0 || store.used_bytes() != 0) {
    Fail("resident store: " + std::to_string(store.used_bytes()) + " bytes in " + std::to_string(store.arrays()) +
         " arrays still counted once every array is dropped");
  }
  return r;
}

}  // namespace gpuscan::fuzz
