// What the resident commands (put, get, arrays, drop, scan/reduce --ref) share: an id from the
// command line, an array's info asked of the server, and that info as text or JSON.
#pragma once

#include <cstdint>
#include <string>

#include "gpuscan/client.h"

namespace gpuscan::cli {

// An id given on the command line (48 hex digits); std::invalid_argument naming `option` otherwise.
std::string ParseArrayId(const std::string& hex, const std::string& option);
// The array's info now (a GetArray of no elements); RpcError NOT_FOUND when there is no such array.
v1::ArrayInfo AskArrayInfo(Client& client, const std::string& id);
// One line: "<id> <dtype>[<n>] <bytes> on <device>, ttl <s>, expires in <s>, label <label>".
std::string ArrayInfoText(const v1::ArrayInfo& info);
// A JSON object of every field (the id in hex, the dtype by name).
std::string ArrayInfoJson(const v1::ArrayInfo& info);

}  // namespace gpuscan::cli
