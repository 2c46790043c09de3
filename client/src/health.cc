// Client::Health: grpc.health.v1.Health/Check through a generic stub. The messages are two
// one-field protos, hand-encoded here: generating health.proto would register the same message
// names as the health service the server links, which breaks binaries that hold both.
#include <condition_variable>
#include <mutex>

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/slice.h>

#include "gpuscan/client.h"

namespace gpuscan {
namespace {

void PutVarint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

bool GetVarint(const std::string& in, size_t& pos, uint64_t& v) {
  v = 0;
  for (int shift = 0; shift < 64 && pos < in.size(); shift += 7) {
    auto b = static_cast<uint8_t>(in[pos++]);
    v |= static_cast<uint64_t>(b & 0x7f) << shift;
    if (!(b & 0x80)) return true;
  }
  return false;
}

// HealthCheckRequest { string service = 1; }
std::string EncodeRequest(const std::string& service) {
  std::string out;
  if (!service.empty()) {
    out.push_back(0x0a);  // field 1, length-delimited
    PutVarint(out, service.size());
    out += service;
  }
  return out;
}

RpcError Malformed() { return RpcError(grpc::StatusCode::INTERNAL, "malformed health response"); }

// HealthCheckResponse { ServingStatus status = 1; }: returns the enum value (0 when absent).
uint64_t DecodeStatus(const std::string& in) {
  uint64_t status = 0;
  size_t pos = 0;
  while (pos < in.size()) {
    uint64_t key = 0, v = 0;
    if (!GetVarint(in, pos, key)) break;
    switch (key & 7) {
      case 0:
        if (!GetVarint(in, pos, v)) throw Malformed();
        if ((key >> 3) == 1) status = v;
        break;
      case 1: pos += 8; break;
      case 2:
        if (!GetVarint(in, pos, v)) throw Malformed();
        pos += v;
        break;
      case 5: pos += 4; break;
      default: throw Malformed();
    }
  }
  return status;
}

std::string StatusName(uint64_t s) {
  switch (s) {
    case 0: return "UNKNOWN";
    case 1: return "SERVING";
    case 2: return "NOT_SERVING";
    case 3: return "SERVICE_UNKNOWN";
    default: return "STATUS_" + std::to_string(s);
  }
}

}  // namespace

std::string Client::Health(const std::string& service) {
  grpc::GenericStub stub(channel_);
  auto ctx = NewContext();
  std::string encoded = EncodeRequest(service);
  grpc::Slice slice(encoded);
  grpc::ByteBuffer request(&slice, 1);
  grpc::ByteBuffer response;

  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  grpc::Status status;
  stub.UnaryCall(ctx.get(), "/grpc.health.v1.Health/Check", grpc::StubOptions(), &request,
                 &response, [&](grpc::Status s) {
                   std::lock_guard<std::mutex> lock(mu);
                   status = std::move(s);
                   done = true;
                   cv.notify_one();
                 });
  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return done; });
  }
  if (!status.ok()) throw RpcError(status);

  std::vector<grpc::Slice> slices;
  std::string bytes;
  if (response.Dump(&slices).ok()) {
    for (const auto& s : slices) bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  return StatusName(DecodeStatus(bytes));
}

}  // namespace gpuscan
