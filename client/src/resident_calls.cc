// Resident arrays: PutArray, GetArray, DropArray, ListArrays, and Scan and Reduce on an array the
// server keeps (header.resident; the raw ScanResident and the other operations: resident_ops.cc);
// RemoteArray, the RAII owner of one. Array bytes travel as raw
// messages (raw_messages.h): a Put sends the caller's memory as it lies, a Get hands the slices
// gRPC received to the Sink.
#include <algorithm>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>

#include "gpuscan/client.h"
#include "raw_messages.h"
#include "retry.h"
#include "stream_driver.h"
#include "typed_support.h"

namespace gpuscan {
namespace {

constexpr const char* kPutArrayMethod = "/gpuscan.v1.GpuScan/PutArray";
constexpr const char* kGetArrayMethod = "/gpuscan.v1.GpuScan/GetArray";

// A server-streaming call of the raw method `name`, its responses read as RawIn.
template <class RespMsg, class Request>
std::unique_ptr<grpc::ClientReader<detail::RawIn<RespMsg>>> ResidentRawReader(const std::shared_ptr<grpc::Channel>& channel,
                                                                      const char* name, grpc::ClientContext* ctx,
                                                                      const Request& request) {
  grpc::internal::RpcMethod method(name, grpc::internal::RpcMethod::SERVER_STREAMING, channel);
  return std::unique_ptr<grpc::ClientReader<detail::RawIn<RespMsg>>>(
      grpc::internal::ClientReaderFactory<detail::RawIn<RespMsg>>::Create(channel.get(), method, ctx, request));
}

RpcError ResidentDataLoss(const std::string& what) { return RpcError(grpc::StatusCode::DATA_LOSS, "gpuscan: " + what); }

// A resident call is one call on one server: lanes and shards asked for it are a mistake.
void CheckResidentOneCall(const ScanOptions& options) {
  if (options.lanes > 1 || options.shards > 1) {
    throw std::invalid_argument("gpuscan: a resident array is scanned by one call on its server (ScanOptions asks "
                                "for " + std::to_string(options.lanes) + " lanes, " + std::to_string(options.shards) +
                                " shards)");
  }
}

v1::ScanHeader ResidentScanHeader(Client& client, const RemoteArray& in, const ScanOptions& options) {
  if (!in) throw std::invalid_argument("gpuscan: Scan of an empty RemoteArray");
  CheckResidentOneCall(options);
  if (options.carry) detail::RequireServed(client, "scan_carry", "scans with a carry");
  v1::ScanHeader header = detail::ScanHeaderFor(in.dtype(), options);
  header.set_element_count(in.size());
  header.mutable_resident()->set_values(in.id());
  return header;
}

}  // namespace

std::string ArrayIdHex(const std::string& id) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(id.size() * 2);
  for (unsigned char c : id) {
    hex += kDigits[c >> 4];
    hex += kDigits[c & 15];
  }
  return hex;
}

std::string ArrayIdFromHex(const std::string& hex) {
  auto digit = [&](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    throw std::invalid_argument("array id '" + hex + "': not hex digits");
  };
  if (hex.size() != 48) {
    throw std::invalid_argument("array id '" + hex + "': " + std::to_string(hex.size()) +
                                " characters; an id is 48 hex digits (24 bytes)");
  }
  std::string id(24, '\0');
  for (size_t i = 0; i < id.size(); ++i) id[i] = static_cast<char>(digit(hex[2 * i]) << 4 | digit(hex[2 * i + 1]));
  return id;
}

// RemoteArray

RemoteArray::~RemoteArray() {
  if (!client_) return;
  try {
    client_->DropArray(info_.id());
  } catch (...) {  // expired, or the server is gone: not held either way
  }
}

RemoteArray::RemoteArray(RemoteArray&& other) noexcept
    : client_(std::exchange(other.client_, nullptr)), info_(std::move(other.info_)) {}

RemoteArray& RemoteArray::operator=(RemoteArray&& other) noexcept {
  if (this != &other) {
    RemoteArray old(std::move(*this));  // dropped on leaving
    client_ = std::exchange(other.client_, nullptr);
    info_ = std::move(other.info_);
  }
  return *this;
}

void RemoteArray::CheckHeld(const char* what) const {
  if (!client_) throw std::logic_error(std::string("gpuscan: RemoteArray::") + what + " on an empty RemoteArray");
}

void RemoteArray::CheckDType(v1::DType want, v1::DType have) {
  if (want != have) {
    throw std::invalid_argument("gpuscan: the resident array holds " + v1::DType_Name(have) + ", not " +
                                v1::DType_Name(want));
  }
}

std::string RemoteArray::Get(uint64_t offset, std::optional<uint64_t> count) const {
  CheckHeld("Get");
  return client_->GetArray(info_.id(), offset, count);
}

const v1::ArrayInfo& RemoteArray::Refresh() {
  CheckHeld("Refresh");
  client_->GetArray(info_.id(), 0, 0, &info_);  // an empty range: only the info comes back
  return info_;
}

v1::ArrayInfo RemoteArray::Drop() {
  CheckHeld("Drop");
  Client* client = std::exchange(client_, nullptr);
  return client->DropArray(info_.id());
}

v1::ArrayInfo RemoteArray::release() {
  client_ = nullptr;
  return std::move(info_);
}

// Client

RemoteArray Client::Put(v1::DType dtype, const void* data, size_t bytes, const ResidentOptions& options) {
  const size_t esize = DTypeSize(dtype);
  if (esize == 0) throw std::invalid_argument("gpuscan: Put of dtype " + std::to_string(dtype) + ": not an element type");
  if (bytes % esize) {
    throw std::invalid_argument("gpuscan: Put of " + std::to_string(bytes) + " bytes: not whole " +
                                v1::DType_Name(dtype) + " elements");
  }
  v1::PutArrayHeader header;
  header.set_dtype(dtype);
  header.set_element_count(bytes / esize);
  header.set_ttl_ms(static_cast<uint64_t>(std::max<int64_t>(0, options.ttl.count())));
  header.set_label(options.label);
  return RemoteArray(*this, PutStream(header, SourceAt::Memory(data, bytes)));
}

v1::ArrayInfo Client::PutStream(const v1::PutArrayHeader& header, Source in, Progress progress) {
  detail::BorrowedSlices borrowed;  // before the call: it outlives the slices gRPC still holds
  auto ctx = NewContext();
  v1::ArrayInfo info;
  auto stream = detail::RawWriter<v1::PutArrayRequest>(channel_, kPutArrayMethod, ctx.get(), &info);
  detail::ProgressTracker tracker(std::move(progress));
  const size_t chunk = ChunkBytes(std::max<size_t>(DTypeSize(header.dtype()), 1));
  detail::RawOut<v1::PutArrayRequest> req;
  *req.msg.mutable_header() = header;
  try {
    bool ended = !in;
    for (bool first = true;; first = false) {  // the header rides with the first chunk
      req.data = detail::NextChunk(in, chunk, ended, &borrowed);
      if (req.data.size() == 0 && !first) break;
      if (!stream->Write(req)) break;  // the call is over: Finish says why
      tracker.Sent(req.data.size());
      if (ended) break;
      req.clear_header();
    }
  } catch (...) {  // the caller's Source failed: no array is made
    ctx->TryCancel();
    stream->Finish();
    throw;
  }
  stream->WritesDone();
  const grpc::Status status = stream->Finish();
  if (!status.ok()) throw RpcError(status);
  return info;
}

namespace {

// One GetArray call: the responses' data to `out` (whole elements, in order), checked to be the
// range asked for; returns the array's info.
v1::ArrayInfo ResidentGetOnce(const std::shared_ptr<grpc::Channel>& channel, grpc::ClientContext& ctx,
                      const v1::GetArrayRequest& request, const Sink& out, detail::ProgressTracker& tracker) {
  auto reader = ResidentRawReader<v1::GetArrayResponse>(channel, kGetArrayMethod, &ctx, request);
  v1::ArrayInfo info;
  std::optional<detail::ElementFeeder> feeder;
  size_t esize = 0;
  uint64_t next = request.offset(), end = 0;
  std::exception_ptr error;
  detail::RawIn<v1::GetArrayResponse> resp;
  try {
    detail::ReceiveInitialMetadata(*reader);
    while (reader->Read(&resp)) {
      if (!feeder) {
        if (!resp.msg.has_info()) throw ResidentDataLoss("GetArray's first response carries no ArrayInfo");
        info = resp.msg.info();
        esize = std::max<size_t>(DTypeSize(info.dtype()), 1);
        end = request.has_count() ? request.offset() + request.count() : info.element_count();
        feeder.emplace(out, esize);
      }
      if (resp.data_bytes() == 0) continue;
      if (resp.msg.offset() != next || resp.data_bytes() % esize) {
        throw ResidentDataLoss("GetArray sent " + std::to_string(resp.data_bytes()) + " bytes at element " +
                       std::to_string(resp.msg.offset()) + " where element " + std::to_string(next) + " was next");
      }
      feeder->Feed(resp.split.field);
      next += resp.data_bytes() / esize;
      tracker.Received(resp.data_bytes());
    }
  } catch (...) {
    error = std::current_exception();
    ctx.TryCancel();
    while (reader->Read(&resp)) {
    }
  }
  const grpc::Status status = reader->Finish();
  if (error) std::rethrow_exception(error);
  if (!status.ok()) throw RpcError(status);
  if (!feeder) throw ResidentDataLoss("GetArray ended without a response");
  if (next != end) {
    throw ResidentDataLoss("GetArray ended at element " + std::to_string(next) + " of " + std::to_string(end));
  }
  return info;
}

}  // namespace

v1::ArrayInfo Client::GetArrayStream(const std::string& id, Sink out, uint64_t offset, std::optional<uint64_t> count,
                                     Progress progress) {
  v1::GetArrayRequest request;
  request.set_id(id);
  request.set_offset(offset);
  if (count) request.set_count(*count);
  request.set_chunk_bytes(options_.chunk_bytes);
  detail::ResumingSink resume(std::move(out));
  return detail::WithRetries(options_, *calls_, [&] {
    detail::ProgressTracker tracker(progress);
    auto ctx = NewContext();
    return ResidentGetOnce(channel_, *ctx, request, resume.NextAttempt(), tracker);
  });
}

std::string Client::GetArray(const std::string& id, uint64_t offset, std::optional<uint64_t> count,
                             v1::ArrayInfo* info) {
  std::string data;
  v1::ArrayInfo got = GetArrayStream(
      id, [&data](const void* p, size_t n) { data.append(static_cast<const char*>(p), n); }, offset, count);
  if (info) *info = std::move(got);
  return data;
}

v1::ArrayInfo Client::DropArray(const std::string& id) {
  v1::DropArrayRequest request;
  request.set_id(id);
  v1::DropArrayResponse response;
  auto ctx = NewContext();
  const grpc::Status status = stub_->DropArray(ctx.get(), request, &response);
  if (!status.ok()) throw RpcError(status);
  return response.info();
}

v1::ListArraysResponse Client::ListArrays(const v1::ListArraysRequest& request) {
  return detail::WithRetries(options_, *calls_, [&] {
    v1::ListArraysResponse response;
    auto ctx = NewContext();
    const grpc::Status status = stub_->ListArrays(ctx.get(), request, &response);
    if (!status.ok()) throw RpcError(status);
    return response;
  });
}

v1::ListArraysResponse Client::ListArrays() {
  v1::ListArraysRequest request;
  v1::ListArraysResponse all = ListArrays(request);
  while (!all.next_page_token().empty()) {  // the counts are the last page's, the newest
    request.set_page_token(all.next_page_token());
    v1::ListArraysResponse page = ListArrays(request);
    for (v1::ArrayInfo& a : *page.mutable_arrays()) *all.add_arrays() = std::move(a);
    page.clear_arrays();
    all.Swap(&page);  // the page's counts and token, every array so far
    all.mutable_arrays()->Swap(page.mutable_arrays());
  }
  return all;
}

v1::ReduceResponse Client::ReduceResident(const v1::ReduceHeader& header) {
  return detail::WithRetries(options_, *calls_, [&] { return ReduceHeaderOnly(header); });
}

RemoteArray Client::Scan(const RemoteArray& in, const ScanOptions& options, const ResidentOptions& keep) {
  v1::ScanHeader header = ResidentScanHeader(*this, in, options);
  v1::Resident* r = header.mutable_resident();
  r->set_keep(true);
  r->set_ttl_ms(static_cast<uint64_t>(std::max<int64_t>(0, keep.ttl.count())));
  r->set_label(keep.label);
  const v1::ScanResponse last = ScanResident(header);
  if (!last.has_array()) throw ResidentDataLoss("a kept Scan's final response carries no ArrayInfo");
  return RemoteArray(*this, last.array());
}

template <class T>
ScanResult<T> Client::Scan(const RemoteArray& in, const ScanOptions& options) {
  if (in && in.dtype() != DTypeOf<T>()) {
    throw std::invalid_argument("gpuscan: the resident array holds " + v1::DType_Name(in.dtype()) + ", not " +
                                v1::DType_Name(DTypeOf<T>()));
  }
  const v1::ScanHeader header = ResidentScanHeader(*this, in, options);
  ScanResult<T> result;
  result.values.resize(in.size());
  detail::BufferSink sink(result.values.data(), in.size() * sizeof(T), "the server");
  SinkAt at = sink.at();
  result.timing = FromProto(ScanResident(header, at).timing());
  sink.CheckFull();
  return result;
}

template <class T>
ReduceResult<T> Client::Reduce(const RemoteArray& in, v1::Operator op) {
  if (!in) throw std::invalid_argument("gpuscan: Reduce of an empty RemoteArray");
  if (in.dtype() != DTypeOf<T>()) {
    throw std::invalid_argument("gpuscan: the resident array holds " + v1::DType_Name(in.dtype()) + ", not " +
                                v1::DType_Name(DTypeOf<T>()));
  }
  v1::ReduceHeader header;
  header.set_dtype(in.dtype());
  header.set_op(op);
  header.set_element_count(in.size());
  header.mutable_resident()->set_values(in.id());
  const v1::ReduceResponse response = ReduceResident(header);
  ReduceResult<T> result;
  // raw_value is exact for every dtype; the Scalar is the fallback (as the streamed Reduce's).
  if (response.raw_value().size() == sizeof(T)) {
    std::memcpy(&result.value, response.raw_value().data(), sizeof(T));
  } else {
    result.value = detail::FromScalar<T>(response.value());
  }
  result.element_count = response.element_count();
  result.timing = FromProto(response.timing());
  return result;
}

#define GPUSCAN_RESIDENT_INSTANTIATE(T)                                            \
  template ScanResult<T> Client::Scan<T>(const RemoteArray&, const ScanOptions&); \
  template ReduceResult<T> Client::Reduce<T>(const RemoteArray&, v1::Operator);
GPUSCAN_FOR_EACH_ELEMENT_TYPE(GPUSCAN_RESIDENT_INSTANTIATE)
#undef GPUSCAN_RESIDENT_INSTANTIATE

}  // namespace gpuscan
