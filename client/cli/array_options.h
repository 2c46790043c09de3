// Options shared by the array commands (scan, reduce, compact, histogram): where the input comes from and
// where results go.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "array_input.h"
#include "array_output.h"

namespace gpuscan::cli {

// Above this many elements, results are not printed to a terminal unless asked with -o -.
constexpr uint64_t kMaxTerminalElements = 1000;

struct ArrayArgs {
  std::string input = "-";
  std::string format = "auto";
  std::string dtype;
  std::string output;  // empty: not given
  std::string out_format = "auto";
  uint32_t lanes = 0;  // --lanes (lanes_option.h); 0 = not given
  uint32_t shards = 1;  // --shards (shards_option.h)
  bool shm = false;     // --shm (shm_option.h)
  std::string shm_dir;  // --shm-dir
};

void AddInputOptions(CLI::App* cmd, ArrayArgs& a);
void AddOutputOptions(CLI::App* cmd, ArrayArgs& a);
// A subcommand that reads an array and writes one: `name`, with the input and output options.
CLI::App* AddArrayCommand(CLI::App& app, const std::string& name, const std::string& description, ArrayArgs& a);
// The transports of Scan, Reduce and Compact: --lanes, --shards, --shm and --shm-dir.
void AddTransportOptions(CLI::App* cmd, ArrayArgs& a);
// --op: the operator (OperatorNames()), `op`'s value the default shown.
CLI::Option* AddOperatorOption(CLI::App* cmd, std::string& op);
InputSpec MakeInputSpec(const ArrayArgs& a);

// Where results go. -o FILE: that file (format by --out-format or extension). -o -: stdout.
// No -o: text on stdout, except in --json mode (stdout holds the report: error) and when stdout
// is a terminal and more than kMaxTerminalElements are expected (error suggesting -o).
OutputSpec ResolveOutput(const std::string& path, const std::string& out_format, bool json,
                         std::optional<uint64_t> expected_count);

// Help text describing the input and output rules, for subcommand footers.
extern const char* const kArrayIoHelp;

}  // namespace gpuscan::cli
