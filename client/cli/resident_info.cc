// Resident arrays' ids and infos on the command line.
#include "resident_info.h"

#include <chrono>
#include <cstdio>
#include <stdexcept>

#include "gpuscan/json.h"
#include "names.h"

namespace gpuscan::cli {
namespace {

std::string Seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f s", s);
  return buf;
}

}  // namespace

std::string ParseArrayId(const std::string& hex, const std::string& option) {
  try {
    return ArrayIdFromHex(hex);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(option + ": " + e.what() + " (as put and arrays print it)");
  }
}

v1::ArrayInfo AskArrayInfo(Client& client, const std::string& id) {
  v1::ArrayInfo info;
  client.GetArray(id, 0, 0, &info);
  return info;
}

std::string ArrayInfoText(const v1::ArrayInfo& info) {
  const int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::system_clock::now().time_since_epoch()).count();
  const double left = (static_cast<int64_t>(info.expires_unix_ms()) - now_ms) / 1000.0;
  std::string s = ArrayIdHex(info.id()) + " " + DTypeName(info.dtype()) + "[" + std::to_string(info.element_count()) +
                  "] " + std::to_string(info.bytes()) + " bytes on " + (info.device().empty() ? "?" : info.device()) +
                  ", ttl " + Seconds(info.ttl_ms() / 1000.0) + ", expires in " + Seconds(left < 0 ? 0 : left);
  if (!info.label().empty()) s += ", label " + info.label();
  return s;
}

std::string ArrayInfoJson(const v1::ArrayInfo& info) {
  return "{\"id\":" + JsonQuote(ArrayIdHex(info.id())) + ",\"dtype\":" + JsonQuote(DTypeName(info.dtype())) +
         ",\"element_count\":" + std::to_string(info.element_count()) + ",\"bytes\":" + std::to_string(info.bytes()) +
         ",\"device\":" + JsonQuote(info.device()) + ",\"ttl_ms\":" + std::to_string(info.ttl_ms()) +
         ",\"expires_unix_ms\":" + std::to_string(info.expires_unix_ms()) + ",\"label\":" + JsonQuote(info.label()) +
         "}";
}

}  // namespace gpuscan::cli
