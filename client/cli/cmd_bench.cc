// gpuscan bench: options of both modes and the choice between them.
#include <memory>
#include <stdexcept>

#include "bench.h"
#include "commands.h"
#include "names.h"

namespace gpuscan::cli {
namespace {

struct BenchArgs {
  bool kernels = false, e2e = false;
  KernelBenchArgs k;
  E2EArgs e;
  std::string json_path;
};

int RunBench(BenchArgs& a, const GlobalOptions& g) {
  if (a.kernels == a.e2e) throw std::invalid_argument("bench: choose one of --kernels and --e2e");
  if (a.kernels) {
    a.k.json_path = a.json_path;
    return RunKernelBench(a.k, g);
  }
  a.e.json_path = a.json_path;
  return RunE2EBench(a.e, g);
}

}  // namespace

Command AddBenchCommand(CLI::App& app, const GlobalOptions& g) {
  auto a = std::make_shared<BenchArgs>();
  CLI::App* cmd = app.add_subcommand(
      "bench", "Benchmarks: the kernel suite on the server's device (--kernels), or the service "
               "end to end with its transport ceiling (--e2e)");
  cmd->add_flag("--kernels", a->kernels, "run the kernel suite on the server's device (Benchmark RPC)");
  cmd->add_flag("--e2e", a->e2e, "drive concurrent calls through the service and measure the transport ceiling");
  cmd->add_option("--json", a->json_path, "also write the results as JSON to this file");

  // --kernels
  cmd->add_option("--ops", a->k.ops, "kernels: operations (scan, reduce, compact, histogram: the default; segmented_scan, reduce_by_key, sort, scan2d, pcie when named)")
      ->delimiter(',')
      ->check(CLI::IsMember({"scan", "reduce", "compact", "histogram", "segmented_scan", "reduce_by_key", "sort", "scan2d"}));
  cmd->add_option("--algorithms", a->k.algorithms,
                  "kernels: algorithms by the suite's names (decoupled_lookback, cub, one_pass, ...; default all)")
      ->delimiter(',');
  cmd->add_option("--dtypes", a->k.dtypes, "kernels: dtypes (default int32, float32, int64, float64)")
      ->delimiter(',')
      ->check(CLI::IsMember(DTypeNames()));
  cmd->add_option("--sizes", a->k.sizes, "kernels: element counts, e.g. 2^16,2^20,1000000 (default 2^10..2^30)");
  cmd->add_option("--devices", a->k.devices,
                  "kernels: device ordinals to measure, one after the other, e.g. 0,1 (default: the server's first)")
      ->delimiter(',');
  cmd->add_option("--reps", a->k.reps, "kernels: timed runs per row (default: the suite's, 25)");
  cmd->add_option("--warmup", a->k.warmup, "kernels: untimed runs before them (default: the suite's, 3)");
  cmd->add_option("--svg", a->k.svg_path, "kernels: write a plot of GB/s against size (SVG) to this file");

  // --e2e
  cmd->add_option("--op", a->e.op, "e2e: the call to drive")
      ->check(CLI::IsMember({"scan", "reduce", "compact"}))
      ->capture_default_str();
  cmd->add_option("--dtype", a->e.dtype, "e2e: element type")->check(CLI::IsMember(DTypeNames()))->capture_default_str();
  auto* elements = cmd->add_option("--elements", a->e.elements, "e2e: elements per request")
                       ->check(CLI::PositiveNumber)
                       ->capture_default_str();
  cmd->add_option("--bytes", a->e.bytes, "e2e: input bytes per request (instead of --elements)")
      ->check(CLI::PositiveNumber)
      ->excludes(elements);
  cmd->add_option("--concurrency", a->e.concurrency, "e2e: concurrent calls, one level each")
      ->delimiter(',')
      ->check(CLI::Range(1u, 4096u))
      ->capture_default_str();
  auto* duration = cmd->add_option("--duration", a->e.duration_s,
                                   "e2e: seconds per level (and again for its transport ceiling)")
                       ->check(CLI::PositiveNumber)
                       ->capture_default_str();
  cmd->add_option("--requests", a->e.requests, "e2e: requests per level instead of a duration")
      ->check(CLI::PositiveNumber)
      ->excludes(duration);
  cmd->add_option("--warmup-calls", a->e.warmup_calls,
                  "e2e: untimed calls before each level and before its ceiling (a fresh server's first call "
                  "also grows and registers its buffers)")
      ->capture_default_str();
  cmd->add_option("--lanes", a->e.lanes,
                  "e2e: striped lanes per call (one array over K calls on K connections); the ceiling "
                  "then runs K plain Transport calls at once on the same K connections")
      ->check(CLI::Range(1u, 1024u))
      ->capture_default_str();
  cmd->add_option("--shards", a->e.shards,
                  "e2e: split each array over the servers of the target (-s ipv4:a:p,b:q or a dns: name) "
                  "in this many contiguous shards, combined by the client; the ceiling then runs as many "
                  "plain Transport calls at once")
      ->check(CLI::Range(1u, 1024u))
      ->capture_default_str();
  auto* shm = cmd->add_flag("--shm", a->e.shm,
                            "e2e: arrays in shared-memory regions (the client on the server's host, which needs "
                            "--shm-dir): one input and one output region per calling thread, reused");
  cmd->add_option("--shm-dir", a->e.shm_dir, "e2e: where to create the regions (default: the server's --shm-dir)")
      ->needs(shm);
  cmd->add_flag("--resident", a->e.resident,
                "e2e: put the input on the server once (it needs --resident-bytes) and name it in each call, "
                "so only the header goes out and the result comes back; the ceiling is one unary call "
                "(Health), its p50 in ms shown in ceil_GB/s's column and %ceil its share of the call's");
  cmd->add_flag("--check", a->e.check,
                "e2e: check every scan result against the expected prefix sums (integer dtypes; "
                "computed once before the run)");
  cmd->add_flag("--plain-io", a->e.plain_io,
                "e2e: feed calls through a plain Source and Sink (lanes take turns reading the input and "
                "one thread takes results in order, as with a caller's own stream) instead of reading "
                "and writing by position (SourceAt/SinkAt, what arrays in memory and files get)");
  cmd->footer(
      "Examples:\n"
      "  gpuscan bench --kernels --ops scan --dtypes int32,float32 --sizes 2^16,2^24,2^28 --json k.json --svg k.svg\n"
      "  gpuscan bench --e2e --op scan --dtype int32 --bytes 1073741824 --concurrency 1 --requests 3\n"
      "  gpuscan bench --e2e --op reduce --elements 1024 --concurrency 1,4,16,64 --duration 10 --json e2e.json\n"
      "  gpuscan bench --e2e --op scan --dtype int32 --bytes 1073741824 --lanes 8 --check --concurrency 1 --requests 3\n"
      "  gpuscan -s ipv4:127.0.0.1:50051,127.0.0.1:50052 bench --e2e --op scan --bytes 1073741824 --shards 2 --check\n"
      "  gpuscan bench --e2e --op scan --bytes 1073741824 --shm --check --concurrency 1 --requests 5\n"
      "  gpuscan bench --e2e --op reduce --elements 1024 --resident --concurrency 1 --requests 2000\n"
      "--e2e drives all calls over one shared channel (one Client, like ghz's default of one\n"
      "connection); the transport ceiling uses the same channel, bytes and concurrency (Transport\n"
      "RPC: echo for scan and compact, no echo for reduce).");
  return {cmd, [a, &g] { return RunBench(*a, g); }};
}

}  // namespace gpuscan::cli
