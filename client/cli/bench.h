// gpuscan bench: the kernel suite on the server's device (--kernels) and the end-to-end service
// benchmark with its transport ceiling (--e2e). Each mode in its own file.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "commands.h"

namespace gpuscan::cli {

struct KernelBenchArgs {
  std::vector<std::string> ops;         // scan, reduce, compact, histogram; empty = all
  std::vector<std::string> algorithms;  // suite names; empty = all
  std::vector<std::string> dtypes;      // int32, ...; empty = the suite's four
  std::string sizes;                    // "2^16,2^20,1000000"; empty = the suite's defaults
  uint32_t reps = 0;                    // 0 = the suite's default
  uint32_t warmup = 0;                  // 0 = the suite's default
  std::vector<int> devices;             // device ordinals, one after the other; empty = the server's first
  std::string json_path, svg_path;      // empty = not written
};

struct E2EArgs {
  std::string op = "scan";  // scan, reduce, compact
  std::string dtype = "int32";
  uint64_t elements = 1 << 20;  // per request
  uint64_t bytes = 0;           // per request, instead of elements when set
  std::vector<unsigned> concurrency = {1, 4, 16, 64};
  double duration_s = 5;  // per level and per ceiling run
  uint64_t requests = 0;  // per level instead of duration when set
  // Untimed calls before each level and before its ceiling: a fresh server's first call also
  // grows its payload pool and registers it for DMA, once, which the ceiling after it never pays.
  uint32_t warmup_calls = 1;
  // Striped lanes per call (1 = one call); the ceiling then runs as many plain Transport calls
  // at once, each on its lane's connection.
  uint32_t lanes = 1;
  // Shards per call (1 = none): the array split over the servers of the target, results
  // combined by the client (ClientOptions::shards); the ceiling runs as many plain Transport
  // calls at once.
  uint32_t shards = 1;
  bool check = false;  // compare every scan result with the expected one (integer dtypes)
  // Plain (ordered) Source and Sink instead of SourceAt/SinkAt: lanes take turns reading the
  // input and one thread takes the results in order, as with a caller's own stream.
  bool plain_io = false;
  // Shared memory (same host): each calling thread's input and output live in regions under
  // this directory (empty: the server's --shm-dir); only headers cross gRPC.
  bool shm = false;
  std::string shm_dir;
  // Resident (bench_e2e_resident.h): the input put on the server once; each call names it.
  bool resident = false;
  std::string json_path;
};

int RunKernelBench(const KernelBenchArgs& a, const GlobalOptions& g);
int RunE2EBench(const E2EArgs& a, const GlobalOptions& g);

// "2^10,65536,1<<20" -> element counts; throws std::invalid_argument naming a bad entry.
std::vector<uint64_t> ParseSizeList(const std::string& list);

}  // namespace gpuscan::cli
