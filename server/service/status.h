// The one mapping from internal failures to gRPC status codes, plus shorthands for handlers.
#pragma once

#include <exception>
#include <string>

#include <grpcpp/support/status.h>

#include "engine/types.h"

namespace gpuscan::server {

grpc::Status ToStatus(const engine::Error& error);
// Maps any exception escaping an engine call: engine::Error by its code, std::bad_alloc to
// RESOURCE_EXHAUSTED, anything else to INTERNAL.
grpc::Status StatusFromException(std::exception_ptr error);

inline grpc::Status InvalidArgument(const std::string& message) {
  return {grpc::StatusCode::INVALID_ARGUMENT, message};
}
inline grpc::Status ResourceExhausted(const std::string& message) {
  return {grpc::StatusCode::RESOURCE_EXHAUSTED, message};
}

std::string CodeName(grpc::StatusCode code);  // "INVALID_ARGUMENT", ...

// The code a finished call is counted under (the metrics): `code`, but a failure of a call whose
// client cancelled counts as CANCELLED (DEADLINE_EXCEEDED stays). A cancel can reach a call after
// its read ended looking like a half-close, and after the call failed on that cut-off input (a
// striped lane with chunks missing: INVALID_ARGUMENT). gRPC calls a call cancelled only when no
// status reached the client (its L66), and knows it by OnDone: ask there.
grpc::StatusCode CountedCode(grpc::StatusCode code, bool client_cancelled);

// Raw bytes as lowercase hex, for messages naming an id (a striped array's, a device's UUID).
std::string HexText(const std::string& bytes);

}  // namespace gpuscan::server
