// The soak's view of the server's memory with no call in flight and no client connected.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <string>

namespace gpuscan::soak {

struct QuietMemory {
  uint64_t rss = 0;          // VmRSS once settled
  uint64_t rss_trimmed = 0;  // VmRSS after malloc_trim (heap probe only)
  uint64_t live_heap = 0;    // bytes allocated and not freed (heap probe only)
  uint64_t threads = 0;      // Threads
  std::map<std::string, uint64_t> thread_names;  // threads by name (/proc/PID/task/*/comm)
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
// The process's threads counted by name (comm, 15 characters: "default-executo", ...).
std::map<std::string, uint64_t> ReadThreadNames(pid_t pid);
// What `end` has more of than `base`, threads by name ("grpc_global_tim +1, ..."), and whether it
// is only gRPC's own pools breathing: at most `slack` more threads, all of gRPC's names (its
// executors and timers start and let go of threads with the load, seconds apart). Growth of any
// other thread (the server's own) is never breathing.
std::string ThreadGrowth(const QuietMemory& base, const QuietMemory& end, uint64_t slack, bool* breathing);

}  // namespace gpuscan::soak
