// gpuscan_soak: a bounded load test on loopback. It starts gpuscan-server as a child process
// (or targets a running one with --server), runs --clients client threads for --duration
// seconds mixing every operation (Scan, Reduce, Compact, SegmentedScan by keys and by heads,
// ReduceByKey, Sort, SortPairs, Argsort, Histogram, Scan2D: workload.h has the weights) over
// every dtype, operator and output kind with sizes from one element to --max-bytes, Scan, Reduce
// and Compact over every transport (one stream; striped lanes, 2 to --lanes per call, and a
// quarter of the clients with ClientOptions::lanes set; shared memory, the child server started
// with --shm-dir a private directory under /dev/shm, --no-shm to leave it out), and checks every
// result against an independent sequential reference.
// The server's memory is read with the load paused (no call in flight, no client connected)
// after the warm-up (half the run) and again at the end: RSS, and with the heap probe preloaded
// (heap_probe.cc) RSS after malloc_trim and the live heap. Fails on any wrong result, any error
// status, a server crash or unclean exit, more threads or open files at the end than at the
// baseline, or memory growth of --rss-growth-limit percent (5) or more: what the live heap
// gained as a share of the RSS with the probe (RSS itself moves by tens of percent between
// quiet moments with no leak at all: docs/RELIABILITY.md), raw RSS growth without it; also on
// an operation, or a transport of Scan, Reduce or Compact, without one correct call. Prints a
// summary (calls and bytes by operation, by transport, and by operation x transport) and writes
// it as JSON (--json).
//
//   gpuscan_soak --duration 30 --clients 64 --engine cpu --json soak.json     (CTest soak_30s)
//   gpuscan_soak --duration 600 --engine cuda --server-binary .gpu-bin/gpuscan-server
//                --heap-probe $PWD/.gpu-bin/libgpuscan_soak_heap_probe.so         (scripts/gpu run soak)
//   gpuscan_soak --server 127.0.0.1:50051 --server-pid 1234 --duration 300    (a running server)
//   gpuscan_soak ... -- --workers 8 --max-concurrent 32                       (extra server flags)
#include <signal.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>

#include "gpuscan/client.h"
#include "memory_probe.h"
#include "reference.h"
#include "server_process.h"
#include "workload.h"

namespace gpuscan::soak {
namespace {

using Clock = std::chrono::steady_clock;
constexpr double kMiB = 1024.0 * 1024.0;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

struct Options {
  std::string server_binary = GPUSCAN_SERVER_PATH;
  std::string engine = "cpu";
  std::string server;  // external server: no child process
  int server_pid = 0;  // external server's pid, for its RSS
  std::vector<std::string> server_args;
  int clients = 64;
  double duration_s = 60;
  double warmup_s = -1;  // default: half the duration, at most 180 s
  uint64_t max_bytes = uint64_t{64} << 20;
  uint64_t inflight_bytes = uint64_t{1} << 30;
  uint64_t ramp_bytes = uint64_t{16} << 20;  // each client's first call: a streaming scan this big
  uint32_t lanes = 4;    // striped calls: 2 to this many lanes (below 2: none)
  bool no_shm = false;   // no shared-memory calls (and no --shm-dir for the child server)
  uint64_t shm_keep_bytes = uint64_t{8} << 20;  // idle shared-memory regions each client keeps for reuse
  double rss_growth_limit_pct = 5.0;
  // Preloaded into the child server to read its live heap (heap_probe.cc says why); empty: none,
  // and the growth limit applies to the raw RSS.
  std::string heap_probe = GPUSCAN_SOAK_HEAP_PROBE_PATH;
  // With the heap probe, the child server runs without glibc's per-thread cache (tcache): the
  // free chunks it holds count as live in mallinfo2, and filling it looked like a slow leak
  // (+50 KiB per 2000 calls; flat at 0.273 MiB over 9265 calls without it).
  bool keep_tcache = false;
  std::vector<std::string> server_env;  // extra KEY=VALUE for the child server
  double checkpoint_s = 0;  // also read the quiet RSS this often after the baseline (0: never)
  uint64_t seed = 0;  // 0: random
  std::string json;
  std::string server_log = "gpuscan_soak_server.log";
};

// Bounds the client-side bytes of the calls in flight: a call waits until its bytes fit (a call
// larger than the whole budget runs alone).
class ByteBudget {
 public:
  explicit ByteBudget(uint64_t cap) : cap_(cap) {}
  void Acquire(uint64_t n) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return used_ == 0 || used_ + n <= cap_; });
    used_ += n;
  }
  void Release(uint64_t n) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      used_ -= n;
    }
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t cap_;
  uint64_t used_ = 0;
};

struct OpStats {
  uint64_t calls = 0, elements = 0, bytes_in = 0, bytes_out = 0, largest_bytes = 0;
  void Add(const Plan& plan, const Outcome& out) {
    calls++;
    elements += plan.elements;
    bytes_in += out.bytes_in;
    bytes_out += out.bytes_out;
    largest_bytes = std::max(largest_bytes, out.bytes_in);
  }
};

// Everything the client threads report, under one lock.
struct Stats {
  std::mutex mu;
  std::map<std::string, OpStats> by_op;
  std::map<std::string, OpStats> by_transport;
  std::map<std::string, std::map<std::string, uint64_t>> by_op_transport;  // correct calls
  std::map<std::string, uint64_t> by_dtype;
  uint64_t errors = 0, wrong = 0;
  std::vector<std::string> failures;  // the first few, described
  // Tries the clients made again (RetryOptions): not failures, but a link fault shows here.
  uint64_t retries = 0;
  std::vector<std::string> retried;  // the first few errors tried again

  void NoteRetry(const std::string& error) {
    std::lock_guard<std::mutex> lock(mu);
    ++retries;
    if (retried.size() < 20) retried.push_back(error);
  }

  void Record(const Plan& plan, const Outcome& out) {
    std::lock_guard<std::mutex> lock(mu);
    if (!out.rpc_ok || !out.correct) {
      (out.rpc_ok ? wrong : errors)++;
      if (failures.size() < 20) {
        failures.push_back(std::string(out.rpc_ok ? "WRONG RESULT " : "ERROR ") + plan.Describe() + ": " + out.error);
      }
      return;
    }
    by_op[Name(plan.operation)].Add(plan, out);
    by_transport[Name(plan.transport)].Add(plan, out);
    by_op_transport[Name(plan.operation)][Name(plan.transport)]++;
    by_dtype[v1::DType_Name(plan.dtype)]++;
  }
  uint64_t Calls() {
    std::lock_guard<std::mutex> lock(mu);
    uint64_t n = 0;
    for (auto& [_, s] : by_op) n += s.calls;
    return n;
  }
  uint64_t Bytes() {
    std::lock_guard<std::mutex> lock(mu);
    uint64_t n = 0;
    for (auto& [_, s] : by_op) n += s.bytes_in + s.bytes_out;
    return n;
  }
};

// Lets the main thread stop the load with no call in flight and no client connected, to read
// the server's memory in a state that does not depend on what the load happened to be doing:
// every client drops its channel (closing its connection) while paused and opens a new one after.
class Gate {
 public:
  // Client side, before opening a channel: waits while paused; false once stopping.
  bool Connect(const std::atomic<bool>& stop) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return !paused_ || stop; });
    if (stop) return false;
    ++connected_;
    return true;
  }
  // After the channel is gone.
  void Disconnect() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      --connected_;
    }
    cv_.notify_all();
  }
  // Before each call: false when paused or stopping (the client then drops its channel).
  bool Enter(const std::atomic<bool>& stop) {
    std::lock_guard<std::mutex> lock(mu_);
    if (paused_ || stop) return false;
    ++in_flight_;
    return true;
  }
  void Leave() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      --in_flight_;
    }
    cv_.notify_all();
  }
  void PauseAndDrain() {
    std::unique_lock<std::mutex> lock(mu_);
    paused_ = true;
    cv_.wait(lock, [&] { return in_flight_ == 0 && connected_ == 0; });
  }
  void Resume() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      paused_ = false;
    }
    cv_.notify_all();
  }
  void WakeAll() { cv_.notify_all(); }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool paused_ = false;
  int in_flight_ = 0;
  int connected_ = 0;
};

std::string Describe(const QuietMemory& m) {
  char buf[256];
  if (m.probed) {
    std::snprintf(buf, sizeof(buf), "RSS %.1f MiB, %.1f MiB after malloc_trim, live heap %.3f MiB, %llu threads, %llu fds",
                  double(m.rss) / kMiB, double(m.rss_trimmed) / kMiB, double(m.live_heap) / kMiB,
                  static_cast<unsigned long long>(m.threads), static_cast<unsigned long long>(m.fds));
  } else {
    std::snprintf(buf, sizeof(buf), "RSS %.1f MiB, %llu threads, %llu fds", double(m.rss) / kMiB,
                  static_cast<unsigned long long>(m.threads), static_cast<unsigned long long>(m.fds));
  }
  return buf;
}

std::string Json(const QuietMemory& m) {
  std::ostringstream j;
  j << "{\"rss_bytes\": " << m.rss << ", \"rss_trimmed_bytes\": " << m.rss_trimmed << ", \"live_heap_bytes\": "
    << m.live_heap << ", \"threads\": " << m.threads << ", \"fds\": " << m.fds << "}";
  return j.str();
}

std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

// Before a quiet reading: the server keeps the files of shared-memory regions open and mapped
// between calls and lets those the clients deleted go only at its next shared-memory call; one
// tiny call here (its region deleted after) leaves exactly one such file at every reading, so
// the open files and live heap compare like for like.
std::string FlushRegionCache(const std::string& target, const std::string& dir) {
  try {
    ClientOptions o;
    o.target = target;
    o.timeout = std::chrono::seconds(30);
    Client client(o);
    SharedRegion region = SharedRegion::Create(dir, sizeof(int64_t));
    const int64_t one = 1;
    std::memcpy(region.data(), &one, sizeof(one));
    v1::ReduceHeader h;
    h.set_dtype(v1::DTYPE_INT64);
    h.set_op(v1::OPERATOR_SUM);
    const v1::ReduceResponse r = client.ReduceShared(h, region, sizeof(int64_t));
    if (r.element_count() != 1) return "the cache flush's reduce saw " + std::to_string(r.element_count()) + " elements";
    return "";
  } catch (const std::exception& e) {
    return std::string("the shared-memory cache flush failed: ") + e.what();
  }
}

int Run(const Options& opt) {
  const double warmup_s = opt.warmup_s >= 0 ? opt.warmup_s : std::min(180.0, 0.5 * opt.duration_s);
  const uint64_t seed = opt.seed ? opt.seed : testing::NewSeed();
  std::printf("gpuscan_soak: %d clients, %.0f s (warm-up %.0f s), sizes 1 element .. %.0f MiB, client budget %.0f MiB, "
              "seed %llu\n",
              opt.clients, opt.duration_s, warmup_s, double(opt.max_bytes) / kMiB, double(opt.inflight_bytes) / kMiB,
              static_cast<unsigned long long>(seed));

  std::unique_ptr<ServerProcess> child;
  const std::string heap_file = opt.server_log + ".heap";
  std::string target = opt.server;
  pid_t pid = opt.server_pid;
  if (target.empty()) {
    std::vector<std::string> env = opt.server_env;
    if (!opt.heap_probe.empty()) {
      auto join = [](const char* var, const std::string& mine, char sep) {
        const char* old = std::getenv(var);
        return std::string(var) + "=" + mine + (old && *old ? sep + std::string(old) : "");
      };
      env.push_back(join("LD_PRELOAD", opt.heap_probe, ':'));
      if (!opt.keep_tcache) env.push_back(join("GLIBC_TUNABLES", "glibc.malloc.tcache_count=0", ':'));
      env.push_back("GPUSCAN_SOAK_HEAP_FILE=" + heap_file);
    }
    // Resident arrays: a budget every client's put and kept result fit at once (a refusal would
    // count as a failed call), unless the flags after -- say otherwise.
    std::vector<std::string> server_args = opt.server_args;
    if (std::none_of(server_args.begin(), server_args.end(),
                     [](const std::string& a) { return a.rfind("--resident-bytes", 0) == 0; })) {
      server_args.push_back("--resident-bytes=" + std::to_string(2 * uint64_t(opt.clients) * opt.max_bytes + (64 << 20)));
    }
    child = std::make_unique<ServerProcess>(opt.server_binary, opt.engine, server_args, env, opt.server_log,
                                            std::chrono::seconds(60), 0, !opt.no_shm);
    target = child->target();
    pid = child->pid();
  }
  std::string engine_name = "?";
  std::string shm_dir;  // shared-memory calls' regions go here; empty: none
  uint32_t max_lanes = opt.lanes;
  bool resident = false;  // the server keeps resident arrays: Scan and Reduce over them too
  {
    ClientOptions o;
    o.target = target;
    o.timeout = std::chrono::seconds(10);
    const v1::ServerInfo info = Client(o).Info();
    engine_name = info.engine();
    // An external server's --shm-dir serves here when this host sees it (loopback: the same host).
    if (!opt.no_shm && info.limits().shared_memory()) {
      shm_dir = child ? child->shm_dir() : info.limits().shm_dir();
      struct stat st {};
      if (!child && (stat(shm_dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))) shm_dir.clear();
    }
    resident = info.limits().resident_bytes() > 0;  // the child's --resident-bytes, or the server's own
    if (info.limits().max_lanes() < 2) max_lanes = 0;  // a server that does not join lanes
    max_lanes = std::min<uint32_t>(max_lanes, info.limits().max_lanes());
  }
  const bool probe = pid > 0 && HasHeapProbe(pid);
  std::printf("transports: stream; %s; %s; %s\n",
              max_lanes >= 2 ? ("striped lanes, 2.." + std::to_string(max_lanes) + " per call").c_str() : "no striped lanes",
              shm_dir.empty() ? "no shared memory" : ("shared memory in " + shm_dir).c_str(),
              resident ? "resident arrays (scan, reduce)" : "no resident arrays");
  std::printf("server %s (pid %d, engine %s, log %s; %s)\n", target.c_str(), int(pid), engine_name.c_str(),
              child ? opt.server_log.c_str() : "-",
              probe ? (opt.keep_tcache ? "heap probe loaded, tcache kept: growth judged on the live heap"
                                       : "heap probe loaded, tcache off: growth judged on the live heap")
                    : "no heap probe: growth judged on raw RSS");
  std::fflush(stdout);

  Stats stats;
  ByteBudget budget(opt.inflight_bytes);
  Gate gate;
  std::atomic<bool> stop{false};
  std::atomic<bool> crashed{false};
  std::string crash_why;
  std::atomic<uint64_t> rss_peak{0};
  std::vector<double> rss_timeline_mib;  // one reading a second

  std::vector<std::thread> clients;
  for (int i = 0; i < opt.clients; ++i) {
    clients.emplace_back([&, i] {
      static constexpr size_t kChunks[] = {64 << 10, 256 << 10, 1 << 20};  // ~1 MiB: the wire convention
      ClientOptions o;
      o.target = target;
      o.chunk_bytes = kChunks[i % 3];
      o.timeout = std::chrono::seconds(300);
      o.retry.on_retry = [&](const RpcError& e, uint32_t next, std::chrono::milliseconds) {
        std::fprintf(stderr, "RETRY (try %u): %s: %s\n", next, StatusCodeName(e.code()).c_str(), e.message().c_str());
        stats.NoteRetry(StatusCodeName(e.code()) + ": " + e.message());
      };
      // A quarter of the clients stripe by default (ClientOptions::lanes): their striped calls
      // leave the count to it half the time, their other calls ask for one lane.
      if (max_lanes >= 2 && i % 4 == 3) o.lanes = 2 + uint32_t(i / 4) % (max_lanes - 1);
      Transports transports;
      transports.max_lanes = max_lanes;
      transports.client_lanes = o.lanes;
      transports.shm_dir = shm_dir;
      transports.resident = resident;
      const Workload workload(opt.max_bytes, o.chunk_bytes, transports);
      std::mt19937_64 rng(seed + 7919 * uint64_t(i));
      auto report = [&](const Plan& plan, const Outcome& out, const char* how) {
        stats.Record(plan, out);
        if (!out.rpc_ok || !out.correct) {
          std::fprintf(stderr, "%s %s%s: %s\n", out.rpc_ok ? "WRONG RESULT" : "ERROR", how, plan.Describe().c_str(),
                       out.error.c_str());
        }
      };
      bool ramped = opt.ramp_bytes == 0;
      while (gate.Connect(stop)) {  // one channel (connection) per stretch between pauses
        {
          Client client(o);
          // This client's regions live as long as its connection: gone while paused.
          std::unique_ptr<RegionPool> pool;
          if (!shm_dir.empty()) pool = std::make_unique<RegionPool>(shm_dir, opt.shm_keep_bytes);
          if (!ramped && gate.Enter(stop)) {
            Plan ramp;  // for the statistics: a streaming int64 sum scan
            ramp.dtype = v1::DTYPE_INT64;
            ramp.elements = opt.ramp_bytes / sizeof(int64_t);
            const Outcome out = workload.RunStreamingScan(client, opt.ramp_bytes, rng());
            gate.Leave();
            report(ramp, out, "streaming ");
            ramped = true;
          }
          while (!stop) {
            const Plan plan = workload.Draw(rng);
            const uint64_t bytes = plan.ClientBytes();
            budget.Acquire(bytes);
            if (!gate.Enter(stop)) {
              budget.Release(bytes);
              break;
            }
            const Outcome out = workload.Run(client, plan, rng, pool.get());
            gate.Leave();
            budget.Release(bytes);
            report(plan, out, "");
          }
        }
        gate.Disconnect();
      }
    });
  }

  // Sampler: RSS peak and timeline, and whether the server is still alive.
  std::mutex timeline_mu;
  std::thread sampler([&] {
    auto next_point = Clock::now();
    while (!stop) {
      if (pid > 0) {
        const uint64_t rss = ReadProcMemory(pid);
        uint64_t peak = rss_peak.load();
        while (rss > peak && !rss_peak.compare_exchange_weak(peak, rss)) {
        }
        if (Clock::now() >= next_point) {
          std::lock_guard<std::mutex> lock(timeline_mu);
          rss_timeline_mib.push_back(double(rss) / kMiB);
          next_point += std::chrono::seconds(1);
        }
      }
      if (child && !child->Alive(&crash_why)) {
        crashed = true;
        stop = true;
        gate.WakeAll();
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
    }
  });

  const auto start = Clock::now();
  const auto deadline = start + std::chrono::duration<double>(opt.duration_s);
  const auto warm = start + std::chrono::duration<double>(warmup_s);
  std::optional<QuietMemory> rss_baseline;
  std::vector<std::string> flush_problems;
  auto flush = [&] {
    if (shm_dir.empty()) return;
    const std::string why = FlushRegionCache(target, shm_dir);
    if (!why.empty()) flush_problems.push_back(why);
  };
  std::vector<std::pair<double, QuietMemory>> checkpoints;  // (s since start, quiet RSS)
  auto next_checkpoint = warm;
  auto next_report = start + std::chrono::seconds(10);
  while (!stop && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (Clock::now() >= next_checkpoint && pid > 0 && !stop) {
      gate.PauseAndDrain();
      flush();
      const QuietMemory m = ReadQuietMemory(pid, probe, heap_file);
      gate.Resume();
      checkpoints.emplace_back(Seconds(Clock::now() - start), m);
      if (!rss_baseline) rss_baseline = m;
      std::printf("[%5.1f s] %s (no client connected): %s\n", Seconds(Clock::now() - start),
                  checkpoints.size() == 1 ? "warm-up done, baseline" : "checkpoint", Describe(m).c_str());
      std::fflush(stdout);
      next_checkpoint = opt.checkpoint_s > 0 ? Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                                                  std::chrono::duration<double>(opt.checkpoint_s))
                                             : Clock::time_point::max();
    }
    if (Clock::now() >= next_report) {
      next_report += std::chrono::seconds(10);
      std::printf("[%5.1f s] %llu calls, %.2f GB, server RSS %.1f MiB\n", Seconds(Clock::now() - start),
                  static_cast<unsigned long long>(stats.Calls()), double(stats.Bytes()) / 1e9,
                  pid > 0 ? double(ReadProcMemory(pid)) / kMiB : 0.0);
      std::fflush(stdout);
    }
  }
  const auto load_end = Clock::now();
  stop = true;
  gate.WakeAll();
  for (auto& t : clients) t.join();
  const double wall_s = Seconds(Clock::now() - start);
  sampler.join();

  QuietMemory rss_end;
  uint64_t rss_hwm = 0;
  std::string exit_why = "external server: not stopped";
  bool clean_exit = true;
  if (!crashed && pid > 0) {
    flush();
    rss_end = ReadQuietMemory(pid, probe, heap_file);
    // gRPC's executor grows under load and lets idle threads go a few seconds later: a thread
    // more than at the baseline is a leak only if it stays (up to 10 s more).
    for (int i = 0; rss_baseline && rss_end.threads > rss_baseline->threads && i < 40; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
      rss_end.threads = ReadThreads(pid);
    }
    rss_end.thread_names = ReadThreadNames(pid);
    std::printf("[%5.1f s] end (no client connected): %s\n", Seconds(Clock::now() - start), Describe(rss_end).c_str());
    rss_hwm = ReadProcMemory(pid, "VmHWM");
  }
  if (child) {
    if (crashed) {
      clean_exit = false;
      exit_why = "crashed during the load: " + crash_why;
    } else {
      clean_exit = child->Stop(std::chrono::seconds(30), &exit_why);
    }
  }

  // ---- verdict
  std::vector<std::string> problems;
  if (stats.wrong) problems.push_back(std::to_string(stats.wrong) + " wrong results");
  if (stats.errors) problems.push_back(std::to_string(stats.errors) + " calls failed");
  if (crashed) problems.push_back("the server crashed: " + crash_why);
  if (child && !crashed && !clean_exit) problems.push_back("the server did not exit cleanly: " + exit_why);
  problems.insert(problems.end(), flush_problems.begin(), flush_problems.end());
  // Every operation, and every transport of the operations that have them, at least once right.
  std::vector<Transport> transports = {Transport::kStream};
  if (max_lanes >= 2) transports.push_back(Transport::kLanes);
  if (!shm_dir.empty()) transports.push_back(Transport::kShm);
  if (resident) transports.push_back(Transport::kResident);
  for (int i = 0; i < kOperations; ++i) {
    const auto op = static_cast<Operation>(i);
    if (stats.by_op[Name(op)].calls == 0) problems.push_back(std::string("no successful ") + Name(op) + " call");
    if (!HasTransports(op)) continue;
    for (Transport t : transports) {
      if (t == Transport::kResident && !HasResident(op)) continue;
      if (stats.by_op_transport[Name(op)][Name(t)] == 0) {
        problems.push_back(std::string("no successful ") + Name(op) + " call over " + Name(t));
      }
    }
  }
  // Memory growth between the two quiet moments: with the heap probe, what the live heap gained as
  // a share of the RSS (the allocator's retention and fragmentation, which move RSS by tens of
  // percent between quiet moments, do not count: docs/RELIABILITY.md); without it, raw RSS.
  double growth_pct = 0, raw_growth_pct = 0;
  const QuietMemory base = rss_baseline ? *rss_baseline : QuietMemory{};
  const bool judged_live = base.probed && rss_end.probed;
  if (probe && !judged_live && rss_baseline && !crashed) {
    problems.push_back("the heap probe did not answer; memory judged on raw RSS instead");
  }
  const bool rss_measured = rss_baseline && base.rss > 0 && rss_end.rss > 0;
  if (rss_measured) {
    raw_growth_pct = 100.0 * (double(rss_end.rss) - double(base.rss)) / double(base.rss);
    growth_pct = judged_live ? 100.0 * (double(rss_end.live_heap) - double(base.live_heap)) / double(base.rss_trimmed)
                             : raw_growth_pct;
    if (growth_pct >= opt.rss_growth_limit_pct) {
      problems.push_back(std::string(judged_live ? "server live heap grew by " : "server RSS grew ") +
                         std::to_string(growth_pct) + "% of its RSS (limit " + std::to_string(opt.rss_growth_limit_pct) +
                         "%)");
    }
    if (rss_end.threads > base.threads) {
      // A leak grows with the calls; gRPC's pools keep a thread or two more for a while.
      bool breathing = false;
      const std::string grew = ThreadGrowth(base, rss_end, 2, &breathing);
      const std::string text = "server threads went from " + std::to_string(base.threads) + " to " +
                               std::to_string(rss_end.threads) + " (" + grew + ")";
      if (breathing) {
        std::printf("note: %s: gRPC's own pools, not a leak\n", text.c_str());
      } else {
        problems.push_back(text);
      }
    }
    if (rss_end.fds > base.fds) {
      problems.push_back("server open files went from " + std::to_string(base.fds) + " to " + std::to_string(rss_end.fds));
    }
  } else if (pid > 0 && !crashed) {
    problems.push_back("server memory not measured (run longer than the warm-up)");
  }

  const uint64_t calls = stats.Calls();
  const uint64_t bytes = stats.Bytes();
  std::printf("\n=== gpuscan soak: engine %s, %d clients, %.1f s\n", engine_name.c_str(), opt.clients, wall_s);
  auto line = [](const std::string& name, const OpStats& s) {
    std::printf("  %-14s %7llu calls  %9.3f GB in  %9.3f GB out  largest %.1f MiB\n", name.c_str(),
                static_cast<unsigned long long>(s.calls), double(s.bytes_in) / 1e9, double(s.bytes_out) / 1e9,
                double(s.largest_bytes) / kMiB);
  };
  for (int i = 0; i < kOperations; ++i) {
    const char* name = Name(static_cast<Operation>(i));
    line(name, stats.by_op[name]);
  }
  std::printf("  by transport:\n");
  for (int i = 0; i < kTransports; ++i) {
    const char* name = Name(static_cast<Transport>(i));
    line(name, stats.by_transport[name]);
  }
  for (const char* op : {"scan", "reduce", "compact"}) {
    auto& m = stats.by_op_transport[op];
    std::printf("  %-14s stream %llu, lanes %llu, shm %llu, resident %llu\n", op,
                static_cast<unsigned long long>(m["stream"]), static_cast<unsigned long long>(m["lanes"]),
                static_cast<unsigned long long>(m["shm"]), static_cast<unsigned long long>(m["resident"]));
  }
  std::printf("  total          %7llu calls  %9.3f GB (in + out), %.0f MB/s, %llu errors, %llu wrong results\n",
              static_cast<unsigned long long>(calls), double(bytes) / 1e9,
              double(bytes) / 1e6 / std::max(1e-9, Seconds(load_end - start)),
              static_cast<unsigned long long>(stats.errors), static_cast<unsigned long long>(stats.wrong));
  if (pid > 0) {
    std::printf("  server memory, no client connected: baseline %s\n", Describe(base).c_str());
    std::printf("                                       end      %s\n", Describe(rss_end).c_str());
    std::printf("  judged growth %+.3f%% of RSS (%s; limit %.1f%%); raw RSS %+.1f%%; peak RSS under load %.1f MiB "
                "(VmHWM %.1f MiB)\n",
                growth_pct, judged_live ? "live heap" : "raw RSS", opt.rss_growth_limit_pct, raw_growth_pct,
                double(rss_peak.load()) / kMiB, double(rss_hwm) / kMiB);
  }
  std::printf("  server exit: %s\n", exit_why.c_str());
  std::printf("  tries made again: %llu\n", static_cast<unsigned long long>(stats.retries));
  for (const auto& r : stats.retried) std::printf("  RETRIED %s\n", r.c_str());
  for (const auto& f : stats.failures) std::printf("  %s\n", f.c_str());
  std::printf("%s\n", problems.empty() ? "PASS" : "FAIL");
  for (const auto& p : problems) std::printf("  - %s\n", p.c_str());

  if (!opt.json.empty()) {
    std::ostringstream j;
    j << "{\n  \"engine\": " << JsonString(engine_name) << ",\n  \"heap_probe\": " << (probe ? "true" : "false")
      << ",\n  \"tcache\": " << (opt.keep_tcache || !probe ? "true" : "false") << ",\n  \"clients\": " << opt.clients
      << ",\n  \"duration_s\": " << opt.duration_s << ",\n  \"warmup_s\": " << warmup_s << ",\n  \"wall_s\": " << wall_s
      << ",\n  \"max_request_bytes\": " << opt.max_bytes << ",\n  \"seed\": " << seed << ",\n  \"calls\": " << calls
      << ",\n  \"bytes\": " << bytes << ",\n  \"errors\": " << stats.errors << ",\n  \"wrong_results\": " << stats.wrong
      << ",\n  \"retries\": " << stats.retries << ",\n  \"by_op\": {";
    auto table = [&](std::map<std::string, OpStats>& m) {
      bool first = true;
      for (auto& [name, s] : m) {
        j << (first ? "\n" : ",\n") << "    " << JsonString(name) << ": {\"calls\": " << s.calls
          << ", \"elements\": " << s.elements << ", \"bytes_in\": " << s.bytes_in << ", \"bytes_out\": " << s.bytes_out
          << ", \"largest_request_bytes\": " << s.largest_bytes << "}";
        first = false;
      }
    };
    table(stats.by_op);
    j << "\n  },\n  \"by_transport\": {";
    table(stats.by_transport);
    j << "\n  },\n  \"by_op_transport\": {";
    bool first = true;
    for (auto& [op, m] : stats.by_op_transport) {
      j << (first ? "\n" : ",\n") << "    " << JsonString(op) << ": {";
      bool inner = true;
      for (auto& [t, n] : m) {
        j << (inner ? "" : ", ") << JsonString(t) << ": " << n;
        inner = false;
      }
      j << "}";
      first = false;
    }
    j << "\n  },\n  \"transports\": {\"max_lanes\": " << max_lanes << ", \"shm_dir\": " << JsonString(shm_dir)
      << "},\n  \"by_dtype\": {";
    first = true;
    for (auto& [name, n] : stats.by_dtype) {
      j << (first ? "" : ", ") << JsonString(name) << ": " << n;
      first = false;
    }
    j << "},\n  \"memory\": {\"judged_on\": " << JsonString(judged_live ? "live heap" : "raw rss")
      << ", \"growth_pct\": " << growth_pct << ", \"limit_pct\": " << opt.rss_growth_limit_pct
      << ", \"raw_rss_growth_pct\": " << raw_growth_pct << ", \"baseline\": " << Json(base)
      << ", \"end\": " << Json(rss_end) << ", \"peak_rss_bytes\": " << rss_peak.load()
      << ", \"hwm_bytes\": " << rss_hwm << ", \"rss_timeline_mib\": [";
    {
      std::lock_guard<std::mutex> lock(timeline_mu);
      for (size_t i = 0; i < rss_timeline_mib.size(); ++i) j << (i ? ", " : "") << int64_t(rss_timeline_mib[i] + 0.5);
    }
    j << "], \"quiet_checkpoints\": [";
    for (size_t i = 0; i < checkpoints.size(); ++i) {
      j << (i ? ", " : "") << "{\"at_s\": " << int64_t(checkpoints[i].first + 0.5) << ", \"memory\": "
        << Json(checkpoints[i].second) << "}";
    }
    j << "]},\n  \"server_exit\": " << JsonString(exit_why) << ",\n  \"failures\": [";
    for (size_t i = 0; i < stats.failures.size(); ++i) j << (i ? ", " : "") << JsonString(stats.failures[i]);
    j << "],\n  \"problems\": [";
    for (size_t i = 0; i < problems.size(); ++i) j << (i ? ", " : "") << JsonString(problems[i]);
    j << "],\n  \"pass\": " << (problems.empty() ? "true" : "false") << "\n}\n";
    std::ofstream(opt.json) << j.str();
  }
  return problems.empty() ? 0 : 1;
}

}  // namespace
}  // namespace gpuscan::soak

int main(int argc, char** argv) {
  gpuscan::soak::Options o;
  CLI::App app{"gpuscan_soak: bounded load test of gpuscan-server on loopback, every result checked"};
  app.option_defaults()->always_capture_default();
  app.add_option("--server-binary", o.server_binary, "gpuscan-server to start as a child process");
  app.add_option("--engine", o.engine, "the child server's --engine")->check(CLI::IsMember({"cpu", "cuda", "auto"}));
  app.add_option("--server", o.server, "target a running server (host:port) instead of starting one");
  app.add_option("--server-pid", o.server_pid, "with --server: its pid, to read its RSS");
  app.add_option("--clients", o.clients, "concurrent client threads (one channel each)")->check(CLI::Range(1, 4096));
  app.add_option("--duration", o.duration_s, "seconds of load")->check(CLI::PositiveNumber);
  app.add_option("--warmup", o.warmup_s, "seconds of load before the RSS baseline (default: half the duration, at most 180)");
  app.add_option("--max-bytes", o.max_bytes, "largest request input in bytes")->check(CLI::Range(uint64_t{8}, uint64_t{1} << 34));
  app.add_option("--inflight-bytes", o.inflight_bytes, "client-side bytes of all calls in flight, at most");
  app.add_option("--ramp-bytes", o.ramp_bytes, "each client's first call: a streaming int64 scan of this many bytes (0: none)");
  app.add_option("--lanes", o.lanes, "striped calls use 2 to this many lanes (below 2: no striped calls)");
  app.add_flag("--no-shm", o.no_shm, "no shared-memory calls (the child server gets no --shm-dir)");
  app.add_option("--shm-keep-bytes", o.shm_keep_bytes, "idle shared-memory regions each client keeps for reuse, bytes");
  app.add_option("--rss-growth-limit", o.rss_growth_limit_pct, "fail at this server RSS growth, percent");
  app.add_option("--checkpoint", o.checkpoint_s, "after the baseline, also read the quiet RSS every this many s (0: never)");
  app.add_flag("--keep-tcache", o.keep_tcache, "leave glibc's tcache on in the child server (its cached chunks count as live)");
  app.add_option("--server-env", o.server_env, "KEY=VALUE for the child server's environment (repeatable)");
  app.add_option("--heap-probe", o.heap_probe,
                 "library preloaded into the child server to read its live heap (empty: judge raw RSS)");
  app.add_option("--seed", o.seed, "random seed (0: random)");
  app.add_option("--json", o.json, "write the summary as JSON here");
  app.add_option("--server-log", o.server_log, "the child server's stdout and stderr");
  app.add_option("server_args", o.server_args, "after --: extra flags for the child server");
  CLI11_PARSE(app, argc, argv);
  try {
    return gpuscan::soak::Run(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpuscan_soak: %s\n", e.what());
    return 2;
  }
}
