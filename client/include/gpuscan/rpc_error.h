// gpuscan::RpcError: every failed call of gpuscan::Client (non-OK status, unreachable server,
// deadline) surfaces as this exception, with the gRPC status code and the server's message.
#pragma once

#include <stdexcept>
#include <string>

#include <grpcpp/support/status.h>

namespace gpuscan {

// "INVALID_ARGUMENT", "UNAVAILABLE", ... (the names of grpc::StatusCode as in the gRPC docs).
std::string StatusCodeName(grpc::StatusCode code);

class RpcError : public std::runtime_error {
 public:
  RpcError(grpc::StatusCode code, std::string message);
  explicit RpcError(const grpc::Status& status);

  grpc::StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }  // the server's message alone

 private:
  grpc::StatusCode code_;
  std::string message_;
};

}  // namespace gpuscan
