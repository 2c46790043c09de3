// The CLI's subcommands. Each Add*Command registers its subcommand and options on the app and
// returns the function that runs it once the command line is parsed (its exit code).
#pragma once

#include <functional>
#include <map>
#include <string>

#include <CLI/CLI.hpp>

#include "gpuscan/client.h"

namespace gpuscan::cli {

struct ArrayArgs;  // array_options.h

// Exit codes: 0 success, 1 any error (message on stderr), 2 health check not SERVING.
constexpr int kExitError = 1;
constexpr int kExitNotServing = 2;

struct GlobalOptions {
  std::string server = "127.0.0.1:50051";
  double timeout_s = 0;  // per call, every retry included; 0 = none
  uint32_t retries = 2;  // tries after the first on UNAVAILABLE (inputs that can be read again)
  size_t chunk_bytes = 1 << 20;
  TlsOptions tls;
  std::string lb_policy;  // "" = gRPC's default (pick_first)
  std::map<std::string, int> channel_args;  // gRPC core channel arguments, NAME=INT
  std::string tenant;  // gpuscan-tenant metadata: whose resident arrays the calls see
  bool json = false;
  bool no_progress = false;
};

ClientOptions MakeClientOptions(const GlobalOptions& g);

struct Command {
  CLI::App* app;
  std::function<int()> run;
};

Command AddInfoCommand(CLI::App& app, const GlobalOptions& g);
Command AddHealthCommand(CLI::App& app, const GlobalOptions& g);
Command AddScanCommand(CLI::App& app, const GlobalOptions& g);
Command AddReduceCommand(CLI::App& app, const GlobalOptions& g);
Command AddCompactCommand(CLI::App& app, const GlobalOptions& g);
Command AddHistogramCommand(CLI::App& app, const GlobalOptions& g);
Command AddSortCommand(CLI::App& app, const GlobalOptions& g);
Command AddScan2DCommand(CLI::App& app, const GlobalOptions& g);
// A Scan2D call on a matrix file (scan2d, and scan --axis): cols_option 0 takes the shape from a
// 2-D .npy; out_dtype_option is --out-dtype (a narrow matrix's accumulator; "" for numpy's default).
// resident->ref given: the matrix the server keeps (its row length cols_option), as resident_args.h.
struct ResidentArgs;
int RunMatrixScan(const ArrayArgs& io, const std::string& op, uint64_t cols_option, v1::ScanAxis axis,
                  bool exclusive, const std::string& out_dtype_option, const GlobalOptions& g,
                  const ResidentArgs* resident = nullptr);
Command AddBenchCommand(CLI::App& app, const GlobalOptions& g);
// Resident arrays: put, get, arrays, drop (the array commands take --ref: resident_args.h).
Command AddPutCommand(CLI::App& app, const GlobalOptions& g);
Command AddGetCommand(CLI::App& app, const GlobalOptions& g);
Command AddArraysCommand(CLI::App& app, const GlobalOptions& g);
Command AddDropCommand(CLI::App& app, const GlobalOptions& g);

}  // namespace gpuscan::cli
