#include "service/status.h"

#include <new>

#include <absl/status/status.h>

namespace gpuscan::server {

grpc::Status ToStatus(const engine::Error& error) {
  using engine::ErrorCode;
  switch (error.code()) {
    case ErrorCode::kInvalidArgument: return {grpc::StatusCode::INVALID_ARGUMENT, error.what()};
    case ErrorCode::kUnimplemented: return {grpc::StatusCode::UNIMPLEMENTED, error.what()};
    case ErrorCode::kResourceExhausted: return {grpc::StatusCode::RESOURCE_EXHAUSTED, error.what()};
    case ErrorCode::kUnavailable: return {grpc::StatusCode::UNAVAILABLE, error.what()};
    case ErrorCode::kFailedPrecondition: return {grpc::StatusCode::FAILED_PRECONDITION, error.what()};
    case ErrorCode::kInternal: break;
  }
  return {grpc::StatusCode::INTERNAL, error.what()};
}

grpc::Status StatusFromException(std::exception_ptr error) {
  try {
    std::rethrow_exception(error);
  } catch (const engine::Error& e) {
    return ToStatus(e);
  } catch (const std::bad_alloc&) {
    return ResourceExhausted("out of host memory");
  } catch (const std::exception& e) {
    return {grpc::StatusCode::INTERNAL, std::string("internal error: ") + e.what()};
  } catch (...) {
    return {grpc::StatusCode::INTERNAL, "internal error"};
  }
}

grpc::StatusCode CountedCode(grpc::StatusCode code, bool client_cancelled) {
  const bool failed = code != grpc::StatusCode::OK && code != grpc::StatusCode::DEADLINE_EXCEEDED;
  return failed && client_cancelled ? grpc::StatusCode::CANCELLED : code;
}

std::string CodeName(grpc::StatusCode code) {
  // gRPC's codes are absl's codes (same numbers), and absl names them.
  std::string name = absl::StatusCodeToString(static_cast<absl::StatusCode>(code));
  return name.empty() ? "CODE_" + std::to_string(static_cast<int>(code)) : name;
}

std::string HexText(const std::string& bytes) {
  static const char* kHex = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out += kHex[c >> 4];
    out += kHex[c & 15];
  }
  return out;
}

}  // namespace gpuscan::server
