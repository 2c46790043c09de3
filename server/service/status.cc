#include "service/status.h"

#include <new>

namespace gpuscan::server {

grpc::Status ToStatus(const engine::Error& error) {
  using engine::ErrorCode;
  switch (error.code()) {
    case ErrorCode::kInvalidArgument: return {grpc::StatusCode::INVALID_ARGUMENT, error.what()};
    case ErrorCode::kUnimplemented: return {grpc::StatusCode::UNIMPLEMENTED, error.what()};
    case ErrorCode::kResourceExhausted: return {grpc::StatusCode::RESOURCE_EXHAUSTED, error.what()};
    case ErrorCode::kUnavailable: return {grpc::StatusCode::UNAVAILABLE, error.what()};
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

const char* CodeName(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK: return "OK";
    case grpc::StatusCode::CANCELLED: return "CANCELLED";
    case grpc::StatusCode::UNKNOWN: return "UNKNOWN";
    case grpc::StatusCode::INVALID_ARGUMENT: return "INVALID_ARGUMENT";
    case grpc::StatusCode::DEADLINE_EXCEEDED: return "DEADLINE_EXCEEDED";
    case grpc::StatusCode::NOT_FOUND: return "NOT_FOUND";
    case grpc::StatusCode::ALREADY_EXISTS: return "ALREADY_EXISTS";
    case grpc::StatusCode::PERMISSION_DENIED: return "PERMISSION_DENIED";
    case grpc::StatusCode::RESOURCE_EXHAUSTED: return "RESOURCE_EXHAUSTED";
    case grpc::StatusCode::FAILED_PRECONDITION: return "FAILED_PRECONDITION";
    case grpc::StatusCode::ABORTED: return "ABORTED";
    case grpc::StatusCode::OUT_OF_RANGE: return "OUT_OF_RANGE";
    case grpc::StatusCode::UNIMPLEMENTED: return "UNIMPLEMENTED";
    case grpc::StatusCode::INTERNAL: return "INTERNAL";
    case grpc::StatusCode::UNAVAILABLE: return "UNAVAILABLE";
    case grpc::StatusCode::DATA_LOSS: return "DATA_LOSS";
    case grpc::StatusCode::UNAUTHENTICATED: return "UNAUTHENTICATED";
    default: return "UNKNOWN_CODE";
  }
}

}  // namespace gpuscan::server
