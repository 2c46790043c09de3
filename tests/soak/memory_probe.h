// The soak's view of the server's memory with no call in flight and no client connected.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

namespace gpuscan::soak {

struct QuietMemory {
  uint64_t rss = 0;          // VmRSS once settled
  uint64_t rss_trimmed = 0;  // VmRSS after malloc_trim (heap probe only)
  uint64_t live_heap = 0;    // bytes allocated and not freed (heap probe only)
  uint64_t threads = 0;      // Threads
  uint64_t fds = 0;          // open file descriptors
  bool probed = false;       // the heap probe answered
};

// Whether the heap probe (heap_probe.cc) is loaded in `pid`, so SIGUSR2 is safe to send.
bool HasHeapProbe(pid_t pid);

// Waits for RSS to settle (2 s), then, when `probe`, asks the heap probe to trim and report
// through `heap_file` (waits up to 5 s for its answer).
QuietMemory ReadQuietMemory(pid_t pid, bool probe, const std::string& heap_file);

// The process's thread count now (/proc/PID/status Threads).
uint64_t ReadThreads(pid_t pid);

}  // namespace gpuscan::soak
