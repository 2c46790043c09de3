// Timing: conversion from the wire message and the JSON / text renderings.
#include "gpuscan/timing.h"

#include <cstdio>
#include <sstream>

#include "gpuscan/json.h"

namespace gpuscan {

Timing FromProto(const v1::Timing& t) {
  Timing r;
  r.receive_us = t.receive_us();
  r.queue_us = t.queue_us();
  r.h2d_us = t.h2d_us();
  r.kernel_us = t.kernel_us();
  r.d2h_us = t.d2h_us();
  r.send_us = t.send_us();
  r.total_us = t.total_us();
  r.bytes_in = t.bytes_in();
  r.bytes_out = t.bytes_out();
  r.chunks = t.chunks();
  r.engine = t.engine();
  r.device = t.device();
  r.algorithm = t.algorithm();
  return r;
}

std::string ToJson(const Timing& t) {
  std::ostringstream o;
  o << "{\"receive_us\":" << t.receive_us << ",\"queue_us\":" << t.queue_us
    << ",\"h2d_us\":" << t.h2d_us << ",\"kernel_us\":" << t.kernel_us
    << ",\"d2h_us\":" << t.d2h_us << ",\"send_us\":" << t.send_us
    << ",\"total_us\":" << t.total_us << ",\"bytes_in\":" << t.bytes_in
    << ",\"bytes_out\":" << t.bytes_out << ",\"chunks\":" << t.chunks
    << ",\"engine\":" << JsonQuote(t.engine) << ",\"device\":" << JsonQuote(t.device)
    << ",\"algorithm\":" << JsonQuote(t.algorithm) << "}";
  return o.str();
}

namespace {

// One stage line: time and, when both are known, the throughput of `bytes` over it.
// bytes per microsecond is exactly MB/s (10^6 bytes per second).
std::string StageLine(const char* name, uint64_t us, uint64_t bytes, const char* what) {
  char buf[160];
  if (us > 0 && bytes > 0) {
    std::snprintf(buf, sizeof buf, "  %-8s %12llu us  %10.1f MB/s %s\n", name,
                  static_cast<unsigned long long>(us), static_cast<double>(bytes) / us, what);
  } else {
    std::snprintf(buf, sizeof buf, "  %-8s %12llu us\n", name,
                  static_cast<unsigned long long>(us));
  }
  return buf;
}

std::string Size(uint64_t bytes) {
  char buf[32];
  if (bytes < 1000000) {
    std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(bytes));
  } else {
    std::snprintf(buf, sizeof buf, "%.1f MB", bytes / 1e6);
  }
  return buf;
}

}  // namespace

std::string ToText(const Timing& t) {
  auto or_unknown = [](const std::string& v) { return v.empty() ? std::string("?") : v; };
  std::string s = "server timing: " + or_unknown(t.engine) + " engine on " + or_unknown(t.device) +
                  ", algorithm " + or_unknown(t.algorithm) + "\n";
  s += "  payload  " + Size(t.bytes_in) + " in, " + Size(t.bytes_out) + " out, " +
       std::to_string(t.chunks) + (t.chunks == 1 ? " chunk\n" : " chunks\n");
  // Stages overlap in the server's pipeline, so they do not add up to total.
  s += StageLine("receive", t.receive_us, t.bytes_in, "in");
  s += StageLine("queue", t.queue_us, 0, "");
  s += StageLine("h2d", t.h2d_us, t.bytes_in, "in");
  s += StageLine("kernel", t.kernel_us, t.bytes_in, "in");
  s += StageLine("d2h", t.d2h_us, t.bytes_out, "out");
  s += StageLine("send", t.send_us, t.bytes_out, "out");
  s += StageLine("total", t.total_us, t.bytes_in + t.bytes_out, "in+out");
  return s;
}

}  // namespace gpuscan
