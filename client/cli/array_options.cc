// Input/output options of the array commands and the rule for results on stdout.
#include "array_options.h"

#include <unistd.h>

#include <stdexcept>

#include "lanes_option.h"
#include "names.h"
#include "shards_option.h"
#include "shm_option.h"

namespace gpuscan::cli {

const char* const kArrayIoHelp =
    "Input (-i FILE, '-' or absent = stdin): format from the extension (.npy; .bin/.raw = raw\n"
    "little-endian binary; .txt/.csv = text), else sniffed from the first bytes, or forced with\n"
    "--format. .npy gives its own dtype (<i4 <i8 <u4 <u8 <f4 <f8, any shape, flattened); raw\n"
    "needs --dtype; text is numbers separated by whitespace or commas, --dtype int64 unless\n"
    "given. Inputs stream from disk or stdin: arrays of any size.\n"
    "Output (-o FILE, '-' = stdout): format from the extension (.npy, .bin/.raw, anything else\n"
    "text, one element per line) or --out-format; stdout defaults to text. Without -o, results\n"
    "are printed to stdout as text, but not to a terminal above 1000 elements, and never with\n"
    "--json (stdout then holds the JSON report): give -o FILE (or -o /dev/null to discard).\n"
    "The server's timing goes to stderr (with --json, into the report on stdout).";

void AddInputOptions(CLI::App* cmd, ArrayArgs& a) {
  cmd->add_option("-i,--input", a.input, "input array file ('-' = stdin)")
      ->capture_default_str();
  cmd->add_option("--format", a.format, "input format")
      ->check(CLI::IsMember({"auto", "npy", "raw", "text"}))
      ->capture_default_str();
  cmd->add_option("--dtype", a.dtype, "element type of raw/text input (text: int64 if absent)")
      ->check(CLI::IsMember(DTypeNames()));
}

void AddOutputOptions(CLI::App* cmd, ArrayArgs& a) {
  cmd->add_option("-o,--output", a.output, "result file ('-' = stdout)");
  cmd->add_option("--out-format", a.out_format, "result format")
      ->check(CLI::IsMember({"auto", "npy", "raw", "text"}))
      ->capture_default_str();
}

CLI::App* AddArrayCommand(CLI::App& app, const std::string& name, const std::string& description, ArrayArgs& a) {
  CLI::App* cmd = app.add_subcommand(name, description);
  AddInputOptions(cmd, a);
  AddOutputOptions(cmd, a);
  return cmd;
}

void AddTransportOptions(CLI::App* cmd, ArrayArgs& a) {
  AddLanesOption(cmd, a.lanes);
  AddShardsOption(cmd, a.shards);
  AddShmOption(cmd, a.shm, a.shm_dir);
}

CLI::Option* AddOperatorOption(CLI::App* cmd, std::string& op) {
  return cmd->add_option("--op", op, "operator")->check(CLI::IsMember(OperatorNames()))->capture_default_str();
}

InputSpec MakeInputSpec(const ArrayArgs& a) {
  InputSpec s;
  s.path = a.input;
  s.format = ParseFormat(a.format);
  if (!a.dtype.empty()) s.dtype = ParseDType(a.dtype);
  return s;
}

OutputSpec ResolveOutput(const std::string& path, const std::string& out_format, bool json,
                         std::optional<uint64_t> expected_count) {
  OutputSpec s;
  s.format = ParseFormat(out_format);
  if (!path.empty()) {
    if (path == "-" && json) {
      throw std::runtime_error("--json prints its report on stdout: give -o FILE for results");
    }
    s.path = path;
    return s;
  }
  if (json) {
    throw std::runtime_error(
        "--json prints its report on stdout: give -o FILE for results (-o /dev/null to discard)");
  }
  if (isatty(STDOUT_FILENO) && expected_count && *expected_count > kMaxTerminalElements) {
    throw std::runtime_error(std::to_string(*expected_count) +
                             " results are too many for the terminal: give -o FILE (or -o - "
                             "to print them anyway)");
  }
  s.path = "-";
  return s;
}

}  // namespace gpuscan::cli
