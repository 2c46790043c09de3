// ProgressBar: redraws at most ten times a second with \r on stderr.
#include "progress.h"

#include <unistd.h>

#include <cstdio>

namespace gpuscan::cli {

ProgressBar::ProgressBar(bool enabled, std::optional<uint64_t> total_bytes)
    : total_(total_bytes), start_(Clock::now()), last_draw_(start_) {
  active_ = enabled && isatty(STDERR_FILENO) && (!total_ || *total_ > kMinBytes);
}

ProgressBar::~ProgressBar() { Clear(); }

void ProgressBar::Update(uint64_t sent, uint64_t received) {
  if (!active_ || (!total_ && sent <= kMinBytes)) return;
  auto now = Clock::now();
  if (drawn_ && now - last_draw_ < std::chrono::milliseconds(100)) return;
  last_draw_ = now;
  double secs = std::chrono::duration<double>(now - start_).count();
  double rate = secs > 0 ? sent / secs / 1e6 : 0;
  char line[160];
  if (total_ && *total_ > 0) {
    double frac = static_cast<double>(sent) / *total_;
    constexpr int kWidth = 24;
    char bar[kWidth + 1];
    int filled = static_cast<int>(frac * kWidth + 0.5);
    for (int i = 0; i < kWidth; ++i) bar[i] = i < filled ? '#' : '.';
    bar[kWidth] = '\0';
    std::snprintf(line, sizeof line, "\r[%s] %3.0f%%  sent %.1f/%.1f MB  recv %.1f MB  %.0f MB/s ",
                  bar, frac * 100, sent / 1e6, *total_ / 1e6, received / 1e6, rate);
  } else {
    std::snprintf(line, sizeof line, "\rsent %.1f MB  recv %.1f MB  %.0f MB/s ", sent / 1e6,
                  received / 1e6, rate);
  }
  std::fputs(line, stderr);
  drawn_ = true;
}

void ProgressBar::Clear() {
  if (!drawn_) return;
  std::fputs("\r\033[K", stderr);  // erase the line so the report starts clean
  drawn_ = false;
}

}  // namespace gpuscan::cli
