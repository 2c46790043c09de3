// gpuscan::Timing: the server's per-call measurements (gpuscan.v1.Timing) as a plain struct,
// with JSON and text renderings for logs and the CLI.
#pragma once

#include <cstdint>
#include <string>

#include "gpuscan/v1/gpuscan.pb.h"

namespace gpuscan {

// Field meanings and units: see gpuscan.v1.Timing (times in microseconds, sizes in bytes).
struct Timing {
  uint64_t receive_us = 0, queue_us = 0, h2d_us = 0, kernel_us = 0, d2h_us = 0, send_us = 0,
           total_us = 0, bytes_in = 0, bytes_out = 0, chunks = 0;
  std::string engine, device, algorithm;
};

Timing FromProto(const v1::Timing& t);

// One JSON object on one line, every field present.
std::string ToJson(const Timing& t);

// Multi-line breakdown: each stage in microseconds with the throughput it implies (MB/s,
// 10^6 bytes per second); ends with a newline.
std::string ToText(const Timing& t);

}  // namespace gpuscan
