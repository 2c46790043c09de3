// gpuscan: command-line client of the gpuscan service. Parses the command line, runs one
// subcommand, and turns every failure into "error: <message>" on stderr and a non-zero exit.
#include <malloc.h>

#include <cstdio>
#include <exception>
#include <vector>

#include <CLI/CLI.hpp>

#include "commands.h"

namespace gpuscan::cli {

ClientOptions MakeClientOptions(const GlobalOptions& g) {
  ClientOptions o;
  o.target = g.server;
  o.chunk_bytes = g.chunk_bytes;
  o.timeout = std::chrono::milliseconds(static_cast<int64_t>(g.timeout_s * 1000));
  o.tls = g.tls;
  o.load_balancing_policy = g.lb_policy;
  for (const auto& [name, value] : g.channel_args) o.channel_int_args[name] = value;
  o.tenant = g.tenant;
  o.retry.attempts = g.retries + 1;
  o.retry.on_retry = [](const RpcError& e, uint32_t next, std::chrono::milliseconds wait) {
    std::fprintf(stderr, "gpuscan: %s: %s; try %u in %lld ms\n", StatusCodeName(e.code()).c_str(),
                 e.message().c_str(), next, static_cast<long long>(wait.count()));
  };
  return o;
}

}  // namespace gpuscan::cli

int main(int argc, char** argv) {
  // Keep the ~1 MiB message buffers in the heap instead of mmapping them per chunk: page faults
  // on fresh mappings halved loopback throughput (same setting as gpuscan-server's main).
  mallopt(M_MMAP_THRESHOLD, 16 << 20);
  mallopt(M_TRIM_THRESHOLD, 32 << 20);
  using namespace gpuscan::cli;
  CLI::App app{"gpuscan: prefix scans, reductions and stream compaction on a gpuscan server"};
  app.require_subcommand(1);
  app.fallthrough();  // global options may also follow the subcommand
  app.footer(
      "Examples:\n"
      "  gpuscan info --server gpu-box:50051\n"
      "  gpuscan scan -i x.npy -o prefix.npy --op sum --exclusive\n"
      "  gpuscan reduce -i x.npy --op max --json\n"
      "  gpuscan compact -i x.npy -o kept.npy --predicate gt --threshold 0\n"
      "  gpuscan histogram -i x.npy --bins 256 --range 0,1 -o counts.npy\n"
      "  seq 1 10 | gpuscan scan --dtype int32\n"
      "  gpuscan bench --kernels --ops scan --sizes 2^20,2^28 --json k.json --svg k.svg\n"
      "  gpuscan bench --e2e --op scan --elements 1048576 --concurrency 1,4,16,64 --duration 5\n"
      "  ID=$(gpuscan put x.npy --ttl-ms 600000 --label x); gpuscan reduce --ref $ID --op max\n"
      "  P=$(gpuscan scan --ref $ID --keep); gpuscan get $P -o prefix.npy; gpuscan drop $P\n"
      "Exit status: 0 success, 1 error (\"error: CODE: message\" on stderr), 2 health not "
      "SERVING (or not answering).");

  GlobalOptions g;
  // Connection options can also come from the environment (GPUSCAN_SERVER, GPUSCAN_CLIENT_*,
  // as --help shows), e.g. for a container's health check; the command line wins.
  app.add_option("-s,--server", g.server,
                 "server address: host:port, or any gRPC target such as dns:///name:port")
      ->capture_default_str()
      ->envname("GPUSCAN_SERVER");
  app.add_option("--timeout", g.timeout_s, "deadline per call in seconds, its retries included (0 = none)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str()
      ->envname("GPUSCAN_CLIENT_TIMEOUT");
  app.add_option("--retries", g.retries,
                 "tries again after UNAVAILABLE (a server that died, restarted or is unreachable; under round_robin "
                 "the next address): the input is sent again, results already written are not written twice; "
                 "stdin and pipes are never retried")
      ->check(CLI::Range(0, 100))
      ->capture_default_str()
      ->envname("GPUSCAN_CLIENT_RETRIES");
  app.add_option("--chunk-bytes", g.chunk_bytes, "bytes of elements per request message")
      ->check(CLI::Range(size_t{8}, size_t{1} << 30))
      ->capture_default_str()
      ->envname("GPUSCAN_CLIENT_CHUNK_BYTES");
  app.add_flag("--tls", g.tls.enabled, "connect with TLS, verifying the server against the system's CAs")
      ->envname("GPUSCAN_CLIENT_TLS");
  app.add_option("--tls-ca", g.tls.ca_file, "PEM CA certificates to verify the server with (implies --tls)")
      ->check(CLI::ExistingFile)
      ->envname("GPUSCAN_CLIENT_TLS_CA");
  app.add_option("--tls-cert", g.tls.cert_file, "PEM client certificate chain, for mutual TLS (implies --tls)")
      ->check(CLI::ExistingFile)
      ->envname("GPUSCAN_CLIENT_TLS_CERT");
  app.add_option("--tls-key", g.tls.key_file, "PEM private key of --tls-cert")
      ->check(CLI::ExistingFile)
      ->envname("GPUSCAN_CLIENT_TLS_KEY");
  app.add_option("--tls-server-name", g.tls.server_name,
                 "name to check the server's certificate against (default: the target's host)")
      ->envname("GPUSCAN_CLIENT_TLS_SERVER_NAME");
  app.add_option("--lb-policy", g.lb_policy,
                 "how calls spread over the addresses a target resolves to: pick_first (gRPC's default) or "
                 "round_robin (per call, e.g. over the pods of a headless Service)")
      ->check(CLI::IsMember({"pick_first", "round_robin"}))
      ->envname("GPUSCAN_CLIENT_LB_POLICY");
  app.add_option("--channel-arg", g.channel_args,
                 "a gRPC core channel argument of every connection, NAME=INT (repeatable), e.g. "
                 "grpc.http2.max_frame_size=1048576")
      ->delimiter('=')
      ->type_name("NAME=INT");
  app.add_option("--tenant", g.tenant,
                 "tenant of the resident arrays the calls put, see and drop (gpuscan-tenant metadata; with mutual "
                 "TLS the certificate decides instead)")
      ->envname("GPUSCAN_CLIENT_TENANT");
  app.add_flag("--json", g.json, "print the report (timing, results) as one JSON object on stdout");
  app.add_flag("--no-progress", g.no_progress, "never draw the progress bar");

  std::vector<Command> commands = {AddInfoCommand(app, g), AddHealthCommand(app, g),
                                   AddScanCommand(app, g), AddReduceCommand(app, g),
                                   AddCompactCommand(app, g), AddHistogramCommand(app, g), AddSortCommand(app, g),
                                   AddScan2DCommand(app, g),
                                   AddBenchCommand(app, g),
                                   AddPutCommand(app, g), AddGetCommand(app, g), AddArraysCommand(app, g),
                                   AddDropCommand(app, g)};
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version exit 0 as CLI11 prints them; a command line that does not parse is an
    // error like any other: "error: ..." and exit 1, as --help promises (CLI11's own codes were
    // 105-109).
    if (e.get_exit_code() == 0) return app.exit(e);
    std::fprintf(stderr, "error: %s\nRun with --help for more information.\n", e.what());
    return kExitError;
  }
  try {
    for (const auto& c : commands) {
      if (c.app->parsed()) return c.run();
    }
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "error: %s\n", e.what());
    return kExitError;
  }
  return kExitError;
}
