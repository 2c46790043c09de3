// The suite's rows as JSON: {"header": {...}, "rows": [...]}.
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "gpuscan/bench/report.h"

namespace gpuscan::bench {

std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (c < 0x20) {
          char esc[8];
          std::snprintf(esc, sizeof esc, "\\u%04x", c);
          out += esc;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

namespace {

// JSON has no NaN or infinity; a row never should either, but keep the file valid.
std::string Number(double x, const char* format = "%.3f") {
  if (!std::isfinite(x)) return "null";
  char buf[64];
  std::snprintf(buf, sizeof buf, format, x);
  return buf;
}

}  // namespace

std::string ToJson(const std::vector<Row>& rows, const std::string& header_json) {
  std::string out = "{\n  \"header\": " + (header_json.empty() ? std::string("{}") : header_json) +
                    ",\n  \"rows\": [";
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    out += i ? ",\n    {" : "\n    {";
    out += "\"operation\": " + JsonString(r.operation);
    out += ", \"algorithm\": " + JsonString(r.algorithm);
    out += ", \"dtype\": " + JsonString(std::string(types::Name(r.dtype)));
    out += ", \"elements\": " + std::to_string(r.elements);
    out += ", \"median_us\": " + Number(r.median_us);
    out += ", \"min_us\": " + Number(r.min_us);
    out += ", \"max_us\": " + Number(r.max_us);
    out += ", \"bytes_moved\": " + std::to_string(r.bytes_moved);
    out += ", \"gbps\": " + Number(r.gbps, "%.2f");
    out += ", \"pct_of_copy\": " + Number(r.pct_of_copy, "%.2f");
    out += ", \"ratio_to_cub\": " + Number(r.ratio_to_cub, "%.4f");
    out += std::string(", \"verified\": ") + (r.verified ? "true" : "false");
    out += ", \"device\": " + JsonString(r.device) + "}";
  }
  out += rows.empty() ? "]\n}\n" : "\n  ]\n}\n";
  return out;
}

}  // namespace gpuscan::bench
