// RpcError: a failed gRPC status as an exception whose what() reads "<CODE_NAME>: <message>".
#include "gpuscan/rpc_error.h"

#include <absl/status/status.h>

namespace gpuscan {

// gRPC's codes are absl's codes (same numbers), and absl names them.
std::string StatusCodeName(grpc::StatusCode code) {
  std::string name = absl::StatusCodeToString(static_cast<absl::StatusCode>(code));
  return name.empty() ? "CODE_" + std::to_string(static_cast<int>(code)) : name;
}

RpcError::RpcError(grpc::StatusCode code, std::string message)
    : std::runtime_error(StatusCodeName(code) + ": " + message),
      code_(code),
      message_(std::move(message)) {}

RpcError::RpcError(const grpc::Status& status)
    : RpcError(status.error_code(), status.error_message()) {}

}  // namespace gpuscan
