#include "memory_probe.h"

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "server_process.h"

namespace gpuscan::soak {
namespace {

struct HeapReport {
  uint64_t live = 0, heap = 0, number = 0;
};

HeapReport ReadHeapFile(const std::string& path) {
  HeapReport r;
  std::ifstream f(path);
  f >> r.live >> r.heap >> r.number;
  return r;
}

uint64_t CountFds(pid_t pid) {
  std::error_code ec;
  uint64_t n = 0;
  for (auto it = std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    ++n;
  }
  return n;
}

}  // namespace

uint64_t ReadThreads(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("Threads:", 0) == 0) return std::stoull(line.substr(8));
  }
  return 0;
}

std::map<std::string, uint64_t> ReadThreadNames(pid_t pid) {
  std::map<std::string, uint64_t> names;
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/task", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    std::ifstream f(it->path() / "comm");
    std::string name;
    if (std::getline(f, name)) ++names[name];
  }
  return names;
}

std::string ThreadGrowth(const QuietMemory& base, const QuietMemory& end, uint64_t slack, bool* breathing) {
  static const char* const kGrpc[] = {"default-executo", "event_engine",   "grpc_global_tim", "grpcpp_sync_ser",
                                      "resolver-execut", "timer_manager", "nexting_thread"};
  std::string text;
  uint64_t grew = 0;
  *breathing = true;
  for (const auto& [name, n] : end.thread_names) {
    const auto at = base.thread_names.find(name);
    const uint64_t before = at == base.thread_names.end() ? 0 : at->second;
    if (n <= before) continue;
    grew += n - before;
    text += (text.empty() ? "" : ", ") + name + " +" + std::to_string(n - before);
    if (std::none_of(std::begin(kGrpc), std::end(kGrpc), [&](const char* g) { return name == g; })) *breathing = false;
  }
  if (grew > slack) *breathing = false;
  return text;
}

bool HasHeapProbe(pid_t pid) {
  std::ifstream maps("/proc/" + std::to_string(pid) + "/maps");
  std::string line;
  while (std::getline(maps, line)) {
    if (line.find("gpuscan_soak_heap_probe") != std::string::npos) return true;
  }
  return false;
}

QuietMemory ReadQuietMemory(pid_t pid, bool probe, const std::string& heap_file) {
  using namespace std::chrono_literals;
  QuietMemory m;
  for (int i = 0; i < 8; ++i) {  // the last of readings a quarter second apart
    std::this_thread::sleep_for(250ms);
    m.rss = ReadProcMemory(pid);
  }
  m.threads = ReadThreads(pid);
  m.thread_names = ReadThreadNames(pid);
  m.fds = CountFds(pid);
  if (!probe) return m;
  // A report left from an earlier probe (or an earlier server) must not pass for this one.
  std::error_code ec;
  std::filesystem::remove(heap_file, ec);
  kill(pid, SIGUSR2);
  for (int i = 0; i < 50; ++i) {
    std::this_thread::sleep_for(100ms);
    const HeapReport r = ReadHeapFile(heap_file);
    if (r.number > 0) {  // complete (0 while the file is still empty)
      m.live_heap = r.live;
      m.probed = true;
      break;
    }
  }
  m.rss_trimmed = ReadProcMemory(pid);
  return m;
}

}  // namespace gpuscan::soak
