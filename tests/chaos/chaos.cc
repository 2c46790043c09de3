// gpuscan_chaos: servers dying under load, on loopback (docs/RELIABILITY.md, "Chaos").
//
// --mode kill (CTest chaos_kill): --servers CPU servers behind one round_robin target, --clients
//   threads running the soak workload (every operation, dtype and operator, over one stream or
//   striped lanes; no shared memory: these servers have no --shm-dir; results checked against
//   the sequential reference) with retries on, while one server at a time is SIGKILLed
//   every --kill-every seconds and restarted at its address after --down seconds. Fails on a
//   wrong result, a call that outlives its deadline, an error other than UNAVAILABLE,
//   CANCELLED or DEADLINE_EXCEEDED (the ends of a call whose retries ran out), fewer than 90% of
//   calls correct, or a server that dies unasked.
// --mode sigterm (CTest chaos_sigterm): one server with --shutdown-grace, --clients threads of
//   streaming scans and one call too slow to finish in the grace; SIGTERM mid-load. Every call
//   in flight must end by SIGTERM + grace (+ --slack) with its correct result or UNAVAILABLE,
//   and the server must exit 0 by then. gRPC 1.51 cancels (CANCELLED) calls that reach the
//   server as it begins to shut down, before any handler runs: allowed within --slack of the
//   SIGTERM, counted apart (the clients' retries take CANCELLED as UNAVAILABLE).
// Both print a summary and write it as JSON (--json).
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "gpuscan/client.h"
#include "server_process.h"
#include "workload.h"

namespace gpuscan::chaos {
namespace {

using Clock = std::chrono::steady_clock;
using soak::ServerProcess;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

struct Options {
  std::string mode = "kill";
  std::string server_binary = GPUSCAN_SERVER_PATH;
  int servers = 3;
  int clients = 8;
  double duration_s = 20;
  double kill_min_s = 1.5, kill_max_s = 3.5;  // between kills
  double down_min_s = 0.2, down_max_s = 1.5;  // a killed server stays down this long
  uint32_t retries = 8;
  double timeout_s = 30;
  uint64_t max_bytes = uint64_t{4} << 20;
  uint64_t chunk_bytes = 64 << 10;
  int grace_ms = 3000;  // sigterm: the server's --shutdown-grace
  double slack_s = 1.5;
  uint64_t seed = 0;
  std::string json;
  std::string log_dir = ".";
};

// What the client threads saw, under one lock.
struct Tally {
  std::mutex mu;
  uint64_t calls = 0, correct = 0, wrong = 0, over_deadline = 0, retries = 0;
  uint64_t cancelled_at_shutdown = 0;  // sigterm: CANCELLED just after the SIGTERM
  std::map<std::string, uint64_t> errors;  // by code
  std::vector<std::string> failures;       // the first few, described
  double longest_s = 0;

  void Note(const std::string& what) {
    if (failures.size() < 20) failures.push_back(what);
  }
  uint64_t Unclear() {  // errors that are not a call's end after its tries
    uint64_t n = 0;
    for (auto& [code, count] : errors) {
      if (code != "UNAVAILABLE" && code != "CANCELLED" && code != "DEADLINE_EXCEEDED") n += count;
    }
    return n;
  }
  nlohmann::json Json() {
    return {{"calls", calls}, {"correct", correct}, {"wrong_results", wrong}, {"errors", errors},
            {"retries", retries}, {"over_deadline", over_deadline}, {"longest_call_s", longest_s},
            {"cancelled_at_shutdown", cancelled_at_shutdown},
            {"failures", failures}};
  }
};

std::string Code(const std::string& error) { return error.substr(0, error.find(':')); }

std::string Log(const Options& o, const std::string& name) { return o.log_dir + "/chaos_" + name + ".log"; }

int RunKill(const Options& o, std::mt19937_64& rng, nlohmann::json& report) {
  std::vector<std::unique_ptr<ServerProcess>> servers;
  std::string target = "ipv4:";
  for (int i = 0; i < o.servers; ++i) {
    servers.push_back(std::make_unique<ServerProcess>(o.server_binary, "cpu", std::vector<std::string>{},
                                                      std::vector<std::string>{}, Log(o, "server" + std::to_string(i))));
    target += (i ? "," : "") + servers[i]->target();
  }
  Tally tally;
  const soak::Workload workload(o.max_bytes, o.chunk_bytes);
  std::atomic<bool> stop{false};
  std::vector<std::thread> clients;
  for (int c = 0; c < o.clients; ++c) {
    clients.emplace_back([&, c, seed = rng()] {
      ClientOptions co;
      co.target = target;
      co.load_balancing_policy = "round_robin";
      co.chunk_bytes = o.chunk_bytes;
      co.timeout = std::chrono::milliseconds(static_cast<int64_t>(o.timeout_s * 1000));
      co.retry.attempts = o.retries + 1;
      co.retry.initial_backoff = std::chrono::milliseconds(50);
      co.retry.max_backoff = std::chrono::milliseconds(1000);
      co.retry.on_retry = [&](const RpcError&, uint32_t, std::chrono::milliseconds) {
        std::lock_guard<std::mutex> lock(tally.mu);
        tally.retries++;
      };
      Client client(co);
      std::mt19937_64 crng(seed);
      while (!stop) {
        const soak::Plan plan = workload.Draw(crng);
        const auto start = Clock::now();
        const soak::Outcome out = workload.Run(client, plan, crng);
        const double took = Seconds(Clock::now() - start);
        std::lock_guard<std::mutex> lock(tally.mu);
        tally.calls++;
        tally.longest_s = std::max(tally.longest_s, took);
        if (took > o.timeout_s + o.slack_s) {
          tally.over_deadline++;
          tally.Note("OVER DEADLINE (" + std::to_string(took) + " s) " + plan.Describe());
        }
        if (out.rpc_ok && out.correct) {
          tally.correct++;
        } else if (out.rpc_ok) {
          tally.wrong++;
          tally.Note("WRONG RESULT " + plan.Describe() + ": " + out.error);
        } else {
          tally.errors[Code(out.error)]++;
          tally.Note("client " + std::to_string(c) + " ERROR " + plan.Describe() + ": " + out.error);
        }
      }
    });
  }
  // The killer: one server down at a time, back at its own address.
  uint64_t kills = 0;
  std::vector<std::string> deaths;  // servers that died unasked
  const Clock::time_point end =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.duration_s));
  auto pause = [&](double lo, double hi) {
    const auto until = std::min(end, Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(
                                          std::uniform_real_distribution<double>(lo, hi)(rng))));
    std::this_thread::sleep_until(until);
  };
  while (Clock::now() < end) {
    pause(o.kill_min_s, o.kill_max_s);
    if (Clock::now() >= end) break;
    for (size_t i = 0; i < servers.size(); ++i) {
      std::string why;
      if (!servers[i]->Alive(&why)) deaths.push_back("server " + std::to_string(i) + ": " + why);
    }
    const size_t victim = rng() % servers.size();
    const int port = servers[victim]->port();
    servers[victim]->Kill();
    kills++;
    pause(o.down_min_s, o.down_max_s);
    servers[victim].reset();
    servers[victim] = std::make_unique<ServerProcess>(o.server_binary, "cpu", std::vector<std::string>{},
                                                      std::vector<std::string>{},
                                                      Log(o, "server" + std::to_string(victim)),
                                                      std::chrono::seconds(30), port);
  }
  stop = true;
  for (auto& t : clients) t.join();
  for (size_t i = 0; i < servers.size(); ++i) {
    std::string why;
    if (!servers[i]->Stop(std::chrono::seconds(10), &why)) deaths.push_back("server " + std::to_string(i) + ": " + why);
  }
  report = tally.Json();
  report["kills"] = kills;
  report["servers"] = o.servers;
  report["clients"] = o.clients;
  report["duration_s"] = o.duration_s;
  report["unexpected_server_exits"] = deaths;
  std::printf("chaos kill: %llu calls, %llu correct, %llu wrong, %llu errors (%llu unclear), %llu retries, "
              "%llu kills, longest call %.2f s, %zu unexpected server exits\n",
              (unsigned long long)tally.calls, (unsigned long long)tally.correct, (unsigned long long)tally.wrong,
              (unsigned long long)(tally.calls - tally.correct - tally.wrong), (unsigned long long)tally.Unclear(),
              (unsigned long long)tally.retries, (unsigned long long)kills, tally.longest_s, deaths.size());
  const bool ok = tally.wrong == 0 && tally.over_deadline == 0 && tally.Unclear() == 0 && deaths.empty() &&
                  kills > 0 && tally.correct * 10 >= tally.calls * 9;
  return ok ? 0 : 1;
}

int RunSigterm(const Options& o, std::mt19937_64& rng, nlohmann::json& report) {
  ServerProcess server(o.server_binary, "cpu", {"--shutdown-grace", std::to_string(o.grace_ms)}, {}, Log(o, "sigterm"));
  Tally tally;
  const soak::Workload workload(o.max_bytes, o.chunk_bytes);
  std::atomic<bool> stop{false};
  std::atomic<int64_t> term_ns{0};  // Clock time of the SIGTERM, once sent
  auto record = [&](Clock::time_point start, const soak::Outcome& out, const std::string& what) {
    const auto now = Clock::now();
    std::lock_guard<std::mutex> lock(tally.mu);
    const int64_t t = term_ns.load();
    const bool started_before = t == 0 || start.time_since_epoch().count() < t;
    const double after = t == 0 ? 0 : Seconds(now.time_since_epoch() - Clock::duration(t));
    const std::string when = t == 0 ? "" : " (started " + std::to_string(Seconds(start.time_since_epoch() - Clock::duration(t))) +
                                               " s, ended " + std::to_string(after) + " s after SIGTERM)";
    if (t != 0 && started_before) {
      tally.longest_s = std::max(tally.longest_s, after);
      if (after > o.grace_ms / 1000.0 + o.slack_s) {
        tally.over_deadline++;
        tally.Note("ENDED " + std::to_string(after) + " s after SIGTERM: " + what +
                   (out.rpc_ok ? "" : " (" + out.error + ")") + when);
      }
    }
    tally.calls++;
    if (out.rpc_ok && out.correct) {
      tally.correct++;
    } else if (out.rpc_ok) {
      tally.wrong++;
      tally.Note("WRONG RESULT " + what + ": " + out.error);
    } else {
      const std::string code = Code(out.error);
      if (code == "CANCELLED" && t != 0 && after <= o.slack_s) {
        tally.cancelled_at_shutdown++;
      } else {
        tally.errors[code]++;
        if (code != "UNAVAILABLE") tally.Note("ERROR " + what + ": " + out.error + when);
      }
    }
  };
  ClientOptions co;
  co.target = server.target();
  co.chunk_bytes = o.chunk_bytes;
  co.timeout = std::chrono::milliseconds(static_cast<int64_t>(o.timeout_s * 1000));
  std::vector<std::thread> clients;
  for (int c = 0; c < o.clients; ++c) {
    clients.emplace_back([&, seed = rng()] {
      Client client(co);
      std::mt19937_64 crng(seed);
      while (!stop) {
        const soak::Plan plan = workload.Draw(crng);
        const auto start = Clock::now();
        record(start, workload.Run(client, plan, crng), plan.Describe());
      }
    });
  }
  // One call that cannot finish within the grace: a scan uploading 64 KiB every 50 ms.
  std::thread slow([&] {
    Client client(co);
    v1::ScanHeader h;
    h.set_dtype(v1::DTYPE_INT32);
    h.set_op(v1::OPERATOR_SUM);
    soak::Outcome out;
    const auto start = Clock::now();
    try {
      client.ScanStream(
          h,
          [&](void* buf, size_t max) -> size_t {
            if (stop) return 0;
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
            const size_t n = std::min<size_t>(max, 64 << 10);
            std::memset(buf, 1, n);
            return n;
          },
          [](const void*, size_t) {});
      out.rpc_ok = true;
      out.error = "the slow call finished: it should have been cut at the grace";
    } catch (const RpcError& e) {
      out.error = StatusCodeName(e.code()) + ": " + e.message();
    }
    record(start, out, "the slow call");
  });
  std::this_thread::sleep_for(std::chrono::duration<double>(o.duration_s));
  term_ns = Clock::now().time_since_epoch().count();
  kill(server.pid(), SIGTERM);
  const auto term = Clock::now();
  while (server.Alive() && Clock::now() < term + std::chrono::milliseconds(o.grace_ms) + std::chrono::seconds(10)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const double exit_after = Seconds(Clock::now() - term);
  stop = true;
  for (auto& t : clients) t.join();
  slow.join();
  std::string why;
  const bool clean = server.Stop(std::chrono::seconds(1), &why);
  report = tally.Json();
  report["grace_ms"] = o.grace_ms;
  report["server_exit"] = why;
  report["server_exit_after_s"] = exit_after;
  std::printf("chaos sigterm: %llu calls, %llu correct, %llu wrong, %llu errors, %llu cancelled as the shutdown "
              "began, %llu ended late; server %s %.2f s after SIGTERM (grace %d ms)\n",
              (unsigned long long)tally.calls, (unsigned long long)tally.correct, (unsigned long long)tally.wrong,
              (unsigned long long)(tally.calls - tally.correct - tally.wrong - tally.cancelled_at_shutdown),
              (unsigned long long)tally.cancelled_at_shutdown, (unsigned long long)tally.over_deadline, why.c_str(),
              exit_after, o.grace_ms);
  uint64_t not_unavailable = 0;
  for (auto& [code, n] : tally.errors) not_unavailable += code == "UNAVAILABLE" ? 0 : n;
  const bool ok = clean && exit_after <= o.grace_ms / 1000.0 + o.slack_s && tally.wrong == 0 &&
                  tally.over_deadline == 0 && not_unavailable == 0 && tally.correct > 0;
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace gpuscan::chaos

int main(int argc, char** argv) {
  using namespace gpuscan::chaos;
  signal(SIGPIPE, SIG_IGN);
  Options o;
  CLI::App app{"gpuscan_chaos: servers killed or shut down under load"};
  app.add_option("--mode", o.mode, "kill or sigterm")->check(CLI::IsMember({"kill", "sigterm"}));
  app.add_option("--server-binary", o.server_binary);
  app.add_option("--servers", o.servers, "kill: servers behind the round_robin target")->check(CLI::Range(2, 16));
  app.add_option("--clients", o.clients)->check(CLI::Range(1, 256));
  app.add_option("--duration", o.duration_s, "seconds of load (sigterm: before the SIGTERM)");
  app.add_option("--kill-every", o.kill_max_s, "kill: at most this many seconds between kills (at least 40% of it)");
  app.add_option("--retries", o.retries);
  app.add_option("--timeout", o.timeout_s, "per call, retries included");
  app.add_option("--max-bytes", o.max_bytes, "largest call's input");
  app.add_option("--chunk-bytes", o.chunk_bytes);
  app.add_option("--grace-ms", o.grace_ms, "sigterm: the server's --shutdown-grace");
  app.add_option("--slack", o.slack_s, "seconds allowed past a deadline or the grace");
  app.add_option("--seed", o.seed, "0: random");
  app.add_option("--json", o.json);
  app.add_option("--log-dir", o.log_dir, "where the servers' logs go");
  CLI11_PARSE(app, argc, argv);
  o.kill_min_s = o.kill_max_s * 0.4;
  if (o.seed == 0) o.seed = std::random_device{}();
  std::printf("seed %llu\n", (unsigned long long)o.seed);
  std::mt19937_64 rng(o.seed);
  nlohmann::json report;
  int rc = 1;
  try {
    rc = o.mode == "kill" ? RunKill(o, rng, report) : RunSigterm(o, rng, report);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "chaos: %s\n", e.what());
    return 1;
  }
  report["mode"] = o.mode;
  report["seed"] = o.seed;
  report["passed"] = rc == 0;
  for (const auto& f : report["failures"]) std::printf("  %s\n", f.get<std::string>().c_str());
  if (!o.json.empty()) std::ofstream(o.json) << report.dump(2) << "\n";
  return rc;
}
