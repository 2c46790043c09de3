// gpuscan-server's main: parses flags, picks the engine, serves until SIGINT/SIGTERM, then
// shuts down gracefully (in-flight calls get --shutdown-grace to finish). With
// --isolate-devices it is instead the front of one worker process per device (isolation/),
// each worker this same program with --devices N.
#include "server_main.h"

#include <malloc.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <iostream>
#include <pthread.h>
#include <stdexcept>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include "bench_suite.h"
#include "engine/engine.h"
#include "isolation/front.h"
#include "service/resident_store.h"
#include "service/server.h"

extern char** environ;

namespace {

// Blocks SIGINT/SIGTERM in every thread (call before any thread starts) so that only the
// main thread's sigwait sees them.
// Ends the process once its shutdown has answered every call: without taking the server apart
// piece by piece, whose memory (the device's included) the OS and the driver take back at once.
// That teardown took 7-9 s after CUDA calls on an H200 (grpc::Server's destruction, 2026-11-29:
// RELIABILITY.md, Known defects) and 1.5 s of exit handlers after large calls on the CPU engine,
// time a deployment's stop timeout had to allow. A unix socket's file is removed as gRPC would.
[[noreturn]] void EndProcess(int code, const std::string& address) {
  if (address.rfind("unix:", 0) == 0) ::unlink(address.substr(5).c_str());
  spdlog::info("exiting {}", code);
  spdlog::shutdown();  // flushes every sink
  std::fflush(nullptr);
  std::_Exit(code);
}

sigset_t BlockShutdownSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  return set;
}

// Keeps the ~1 MiB message buffers gRPC allocates per chunk in the heap. By default glibc
// mmaps and unmaps blocks that size, so every chunk's bytes page-fault their way in again:
// measured on a 2-core VM, upload-only loopback went from 229 MB/s to 0.9-1.5 GB/s with this.
void KeepLargeBuffersInHeap() {
  mallopt(M_MMAP_THRESHOLD, 16 << 20);  // above the largest message (2 x --chunk-bytes default)
  mallopt(M_TRIM_THRESHOLD, 32 << 20);  // still return memory after bursts
}

// --devices: "all" (every device: an empty list) or comma-separated ordinals, each once.
std::vector<int> ParseDevices(const std::string& text) {
  std::vector<int> out;
  if (text == "all") return out;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    const std::string item = text.substr(start, comma - start);
    size_t used = 0;
    int d = -1;
    try {
      d = std::stoi(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (item.empty() || used != item.size() || d < 0) {
      throw std::invalid_argument("'" + text + "' is not all or a list of device ordinals such as 0,2 (at '" + item +
                                  "')");
    }
    if (std::find(out.begin(), out.end(), d) != out.end()) {
      throw std::invalid_argument("'" + text + "' names device " + item + " twice");
    }
    out.push_back(d);
    start = comma + 1;
  }
  return out;
}

}  // namespace

int gpuscan::server::RunServerMain(int argc, char** argv) {
  using namespace gpuscan;
  server::ServerOptions options;
  engine::EngineOptions engine_options;
  std::string log_level = "info";
  int64_t grace_ms = options.shutdown_grace.count();
  int64_t connection_age_ms = 0;
  int64_t lane_wait_ms = options.lane_wait.count();
  int64_t resident_ttl_ms = options.resident_ttl.count();

  CLI::App app{"gpuscan-server: prefix scans, reductions and stream compaction over gRPC"};
  app.option_defaults()->always_capture_default();
  // Every flag can also come from the environment (GPUSCAN_<FLAG>, as --help shows): the
  // container image and the Kubernetes ConfigMap configure the server that way. A flag given on
  // the command line wins over its variable.
  app.add_option("--address", options.address, "host:port to listen on (port 0 picks a free port)")
      ->envname("GPUSCAN_ADDRESS");
  app.add_option("--metrics-address", options.metrics_address,
                 "host:port for the Prometheus /metrics endpoint (empty = off)")
      ->envname("GPUSCAN_METRICS_ADDRESS");
  std::string engine_name = "auto";
  app.add_option("--engine", engine_name, "compute engine: auto (CUDA when a device is present, else cpu), cuda or cpu")
      ->check(CLI::IsMember({"auto", "cuda", "cpu"}))
      ->envname("GPUSCAN_ENGINE");
  std::string devices = "all";
  app.add_option("--devices", devices,
                 "CUDA devices to serve: all, or ordinals such as 0,2 (one engine each; a call runs on the least "
                 "busy healthy one)")
      ->envname("GPUSCAN_DEVICES");
  int device = -1;
  app.add_option("--device", device, "serve only this CUDA device (the same as --devices N)")
      ->check(CLI::NonNegativeNumber)
      ->envname("GPUSCAN_DEVICE");
  std::string isolate = "auto";
  app.add_option("--isolate-devices", isolate,
                 "one worker process per device, so a device's sticky CUDA fault stops only that device (its "
                 "worker restarts): auto (on when serving two or more CUDA devices), on or off")
      ->check(CLI::IsMember({"auto", "on", "off"}))
      ->envname("GPUSCAN_ISOLATE_DEVICES");
  // Set by a front on the workers it starts (not for people): name the device with its ordinal,
  // exit when the device turns unhealthy (the front restarts the worker), tag the log.
  bool worker_of_front = false;
  app.add_option("--worker-of-front", worker_of_front)->group("");
  std::string worker_exe;
  app.add_option("--worker-exe", worker_exe)->group("");  // tests: the workers' program
  app.add_option("--streams", engine_options.streams,
                 "CUDA engine: staging pairs (two streams and pinned buffers each) shared by concurrent calls")
      ->check(CLI::Range(1, 256))
      ->envname("GPUSCAN_STREAMS");
  app.add_option("--device-memory-limit", engine_options.device_memory_limit,
                 "CUDA engine: bytes of device memory it may allocate (0 = no cap); beyond: RESOURCE_EXHAUSTED")
      ->envname("GPUSCAN_DEVICE_MEMORY_LIMIT");
  app.add_option("--max-concurrent", options.max_concurrent, "calls computing at once; more wait in a queue")
      ->check(CLI::Range(1u, 1u << 20))
      ->envname("GPUSCAN_MAX_CONCURRENT");
  app.add_option("--max-queued", options.max_queued,
                 "calls allowed to wait for a slot; beyond this a call gets RESOURCE_EXHAUSTED")
      ->envname("GPUSCAN_MAX_QUEUED");
  app.add_option("--max-request-bytes", options.max_request_bytes,
                 "largest total input of one call in bytes (0 = unlimited); beyond: RESOURCE_EXHAUSTED")
      ->envname("GPUSCAN_MAX_REQUEST_BYTES");
  app.add_option("--max-sort-bytes", options.max_sort_bytes,
                 "largest input (keys and values) one Sort may hold, in bytes; beyond: RESOURCE_EXHAUSTED")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 50))
      ->envname("GPUSCAN_MAX_SORT_BYTES");
  app.add_option("--max-scan2d-row-bytes", options.max_scan2d_row_bytes,
                 "longest row (cols x element size) one Scan2D accepts, in bytes; beyond: RESOURCE_EXHAUSTED")
      ->check(CLI::Range(uint64_t{8}, uint64_t{1} << 40))
      ->envname("GPUSCAN_MAX_SCAN2D_ROW_BYTES");
  app.add_option("--max-inflight-bytes", options.max_inflight_bytes,
                 "bytes all running calls may buffer together (0 = unlimited); calls that would pass it wait")
      ->envname("GPUSCAN_MAX_INFLIGHT_BYTES");
  app.add_option("--chunk-bytes", options.chunk_bytes,
                 "largest data chunk accepted in one request message, in bytes")
      ->check(CLI::Range(uint64_t{64}, uint64_t{512} << 20))
      ->envname("GPUSCAN_CHUNK_BYTES");
  app.add_option("--workers", options.workers, "threads running the compute of calls (0 = hardware threads)")
      ->envname("GPUSCAN_WORKERS");
  app.add_option("--cpu-threads", engine_options.cpu_threads,
                 "threads of the cpu engine's parallel loops (0 = hardware threads)")
      ->envname("GPUSCAN_CPU_THREADS");
  app.add_option("--shutdown-grace", grace_ms, "milliseconds in-flight calls get to finish on SIGINT/SIGTERM")
      ->envname("GPUSCAN_SHUTDOWN_GRACE");
  app.add_option("--max-connection-age", connection_age_ms,
                 "milliseconds after which a client connection is asked to reconnect (0 = never), so "
                 "round_robin clients find new pods; open calls still finish")
      ->check(CLI::Range(int64_t{0}, int64_t{INT32_MAX}))
      ->envname("GPUSCAN_MAX_CONNECTION_AGE");
  app.add_option("--max-lanes", options.max_lanes,
                 "striped lanes: the most concurrent calls (lanes) one array may be split over; more: INVALID_ARGUMENT")
      ->check(CLI::Range(1u, 4096u))
      ->envname("GPUSCAN_MAX_LANES");
  app.add_option("--lane-wait-ms", lane_wait_ms,
                 "striped lanes: milliseconds the lanes of an array wait for the rest to arrive before all fail "
                 "with DEADLINE_EXCEEDED naming the missing ones")
      ->check(CLI::Range(int64_t{1}, int64_t{3600000}))
      ->envname("GPUSCAN_LANE_WAIT_MS");
  app.add_option("--shm-dir", options.shm_dir,
                 "shared memory for clients on this host: calls may name regular files directly under this "
                 "directory as their input/output (no paths, no symlinks; its permissions decide who may); "
                 "unset = off (such calls get FAILED_PRECONDITION)")
      ->check(CLI::ExistingDirectory)
      ->envname("GPUSCAN_SHM_DIR");
  app.add_flag("--allow-device-ipc", options.allow_device_ipc,
               "device memory for clients on this host and GPU: calls may pass CUDA IPC handles of their own "
               "allocations (header.device_memory), computed where they lie with no host copy; cuda engine only, "
               "served to callers on a unix socket or loopback; unset = off (such calls get FAILED_PRECONDITION)")
      ->envname("GPUSCAN_ALLOW_DEVICE_IPC");
  app.add_option("--shm-pin-limit", options.shm_pin_limit,
                 "shared memory: the most bytes of regions kept registered (page-locked) for DMA at once; "
                 "larger regions are copied through staging buffers")
      ->envname("GPUSCAN_SHM_PIN_LIMIT");
  app.add_option("--payload-pool-bytes", options.payload_pool_bytes,
                 "host memory for Scan's, Reduce's and Compact's chunks on their way through the server (made as needed, "
                 "registered for DMA with the cuda engine, so a chunk is copied once on the server); chunks "
                 "beyond it use the heap; 0 = heap only")
      ->envname("GPUSCAN_PAYLOAD_POOL_BYTES");
  app.add_option("--resident-bytes", options.resident_bytes,
                 "resident arrays (PutArray, header.resident): the bytes every tenant's arrays may hold together, "
                 "in device memory on the cuda engine, host memory on the cpu engine; 0 = not served")
      ->envname("GPUSCAN_RESIDENT_BYTES");
  app.add_option("--tenant-quota-bytes", options.tenant_quota_bytes,
                 "resident arrays: the bytes one tenant's arrays may hold (0 = no cap beyond --resident-bytes)")
      ->envname("GPUSCAN_TENANT_QUOTA_BYTES");
  app.add_option("--spill-bytes", options.spill_bytes,
                 "resident arrays: host memory (pinned on the cuda engine) the least recently used arrays spill to "
                 "past --resident-bytes; they come back on their next use; 0 = no spill (a Put past the budget fails)")
      ->envname("GPUSCAN_SPILL_BYTES");
  app.add_option("--resident-ttl-ms", resident_ttl_ms,
                 "resident arrays: milliseconds an array may stay unused before it is dropped (the default ttl "
                 "and the longest a Put may ask for)")
      ->check(CLI::Range(int64_t{1}, int64_t{30} * 24 * 3600 * 1000))
      ->envname("GPUSCAN_RESIDENT_TTL_MS");
  app.add_option("--grpc-arg", options.grpc_int_args,
                 "a gRPC core channel argument of the server, NAME=INT (repeatable), e.g. "
                 "grpc.http2.max_frame_size=1048576; applied as given")
      ->delimiter('=')
      ->type_name("NAME=INT");
  app.add_option("--tls-cert", options.tls_cert_file, "PEM certificate chain of the server; with --tls-key turns TLS on")
      ->check(CLI::ExistingFile)
      ->envname("GPUSCAN_TLS_CERT");
  app.add_option("--tls-key", options.tls_key_file, "PEM private key of --tls-cert")
      ->check(CLI::ExistingFile)
      ->envname("GPUSCAN_TLS_KEY");
  app.add_option("--tls-client-ca", options.tls_client_ca_file,
                 "PEM CA certificates: require client certificates signed by them (mutual TLS)")
      ->check(CLI::ExistingFile)
      ->envname("GPUSCAN_TLS_CLIENT_CA");
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error or off")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "critical", "off"}))
      ->envname("GPUSCAN_LOG_LEVEL");
  CLI11_PARSE(app, argc, argv);
  try {
    engine_options.devices = device >= 0 ? std::vector<int>{device} : ParseDevices(devices);
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "--devices: %s\n", e.what());
    return 2;
  }
  engine_options.kind = engine_name == "cuda" ? engine::EngineKind::kCuda
                        : engine_name == "cpu" ? engine::EngineKind::kCpu
                                               : engine::EngineKind::kAuto;
  KeepLargeBuffersInHeap();

  spdlog::set_level(spdlog::level::from_str(log_level));
  if (worker_of_front) {
    const std::string tag = "device " + (engine_options.devices.empty() ? std::string("?")
                                                                        : std::to_string(engine_options.devices[0]));
    spdlog::set_pattern("[%Y-%m-%d %H:%M:%S.%e] [%^%l%$] [" + tag + "] %v");
    engine_options.label_ordinal = true;
  }
  options.shutdown_grace = std::chrono::milliseconds(grace_ms);
  options.max_connection_age = std::chrono::milliseconds(connection_age_ms);
  options.lane_wait = std::chrono::milliseconds(lane_wait_ms);
  options.resident_ttl = std::chrono::milliseconds(resident_ttl_ms);
  const sigset_t signals = BlockShutdownSignals();

  // Isolation: which devices get a worker each.
  std::vector<int> isolated;
  if (isolate != "off" && !worker_of_front) {
    isolated = engine_options.devices;
    if (isolated.empty() && engine_options.kind != engine::EngineKind::kCpu) {
      for (int d = 0; d < engine::CudaDeviceCount(); ++d) isolated.push_back(d);
    }
    if (isolate == "auto" && (isolated.size() < 2 || engine_options.kind == engine::EngineKind::kCpu)) {
      isolated.clear();
    }
    if (engine_options.kind != engine::EngineKind::kCpu && !isolated.empty()) {
      const int count = engine::CudaDeviceCount();
      for (const int d : isolated) {
        if (count > 0 && d >= count) {
          spdlog::critical("cannot start: --devices names device {} but {} CUDA device(s) are present (0-{})", d,
                           count, count - 1);
          return 1;
        }
      }
    }
    if (isolate == "on" && isolated.empty()) {
      spdlog::critical("cannot start: --isolate-devices on needs devices (--devices), and none were found");
      return 1;
    }
  }
  if (!isolated.empty()) {
    std::unique_ptr<server::Front> front;
    try {
      server::WorkerPoolOptions pool;
      // /proc/self/exe: the very program running, even if its file was replaced since.
      pool.exe = worker_exe.empty() ? "/proc/self/exe" : worker_exe;
      char self[4096] = {};
      if (worker_exe.empty() && ::readlink("/proc/self/exe", self, sizeof(self) - 1) > 0) pool.argv0 = self;
      pool.args = server::WorkerArgs(argc, argv);
      pool.env = server::WorkerEnv(environ);
      pool.devices = isolated;
      char dir_template[] = "/tmp/gpuscan-workers-XXXXXX";
      if (const char* tmp = getenv("TMPDIR"); tmp && *tmp && std::string(tmp).size() < 60) {
        pool.socket_dir = std::string(tmp) + "/gpuscan-workers-XXXXXX";
      } else {
        pool.socket_dir = dir_template;
      }
      if (!mkdtemp(pool.socket_dir.data())) throw std::runtime_error("cannot make " + pool.socket_dir);
      spdlog::info("isolating {} devices in worker processes (sockets under {})", isolated.size(), pool.socket_dir);
      front = server::Front::Start(options, std::move(pool), std::chrono::seconds(60));
    } catch (const std::exception& e) {
      spdlog::critical("cannot start: {}", e.what());
      return 1;
    }
    spdlog::info("gpuscan-server {} listening on {} (front of {} device worker processes)", GPUSCAN_VERSION,
                 front->address(), isolated.size());
    int sig = 0;
    sigwait(&signals, &sig);
    spdlog::info("received {}", sig == SIGINT ? "SIGINT" : "SIGTERM");
    front->Shutdown();  // every call answered, the workers stopped, their sockets removed
    EndProcess(0, "");
  }

  if (worker_of_front) {
    // Its resident ids name its device, and the tenant is the one its front found.
    if (!engine_options.devices.empty()) options.resident_route = engine_options.devices[0] & 0xff;
    server::TrustFrontTenant();
    // A worker whose device turns unhealthy ends (its front starts a fresh one): a sticky
    // CUDA error leaves nothing in this process that could serve again.
    options.on_unhealthy = [] { ::kill(::getpid(), SIGTERM); };
  }
  std::unique_ptr<server::Server> srv;
  try {
    std::string why;
    auto eng = engine::MakeEngine(engine_options, &why);
    spdlog::info("{}", why);
    options.kernel_suite = server::MakeBenchKernelSuite();  // the Benchmark RPC's (null without CUDA)
    srv = server::Server::Start(options, std::move(eng));
  } catch (const std::exception& e) {
    spdlog::critical("cannot start: {}", e.what());
    return 1;
  }
  // (A worker does not say "listening on": tools read the front's address from that line.)
  spdlog::info("gpuscan-server {} {} {} (engine {}, device {}, max-concurrent {}, chunk-bytes {})", GPUSCAN_VERSION,
               worker_of_front ? "worker serving the front on" : "listening on", srv->address(),
               srv->engine().name(), srv->engine().device_name(), options.max_concurrent, options.chunk_bytes);

  int sig = 0;
  sigwait(&signals, &sig);
  spdlog::info("received {}", sig == SIGINT ? "SIGINT" : "SIGTERM");
  srv->Shutdown();
  EndProcess(srv->engine().healthy() ? 0 : 3, options.address);
}
