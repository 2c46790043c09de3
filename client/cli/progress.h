// A one-line progress display on stderr (bytes sent and received, MB/s) for long transfers.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>

#include "gpuscan/client.h"

namespace gpuscan::cli {

class ProgressBar {
 public:
  // Shown only when `enabled`, stderr is a terminal and the transfer is big: input known to be
  // above kMinBytes, or (size unknown) once that much has been sent.
  static constexpr uint64_t kMinBytes = 4'000'000;
  ProgressBar(bool enabled, std::optional<uint64_t> total_bytes);
  ~ProgressBar();  // clears the line if one was drawn

  void Update(uint64_t sent, uint64_t received);
  Progress AsCallback() {
    if (!active_) return {};
    return [this](uint64_t s, uint64_t r) { Update(s, r); };
  }
  void Clear();

 private:
  using Clock = std::chrono::steady_clock;
  bool active_ = false, drawn_ = false;
  std::optional<uint64_t> total_;
  Clock::time_point start_, last_draw_;
};

}  // namespace gpuscan::cli
