// gpuscan get: a resident array's elements (or a range of them) written to a file (GetArray).
#include <memory>
#include <optional>

#include "array_options.h"
#include "commands.h"
#include "names.h"
#include "progress.h"
#include "report.h"
#include "resident_info.h"

namespace gpuscan::cli {
namespace {

struct GetArgs {
  std::string id;
  std::string output;
  std::string out_format = "auto";
  uint64_t offset = 0;
  std::optional<uint64_t> count;
};

int RunGet(const GetArgs& a, const GlobalOptions& g) {
  const std::string id = ParseArrayId(a.id, "ID");
  Client client(MakeClientOptions(g));
  const v1::ArrayInfo info = AskArrayInfo(client, id);  // the dtype and count, for the file's header
  const uint64_t count = a.count ? *a.count : (a.offset <= info.element_count() ? info.element_count() - a.offset : 0);
  ArrayOutput out(ResolveOutput(a.output, a.out_format, g.json, count), info.dtype(), count);
  ProgressBar bar(!g.no_progress, count * DTypeSize(info.dtype()));
  client.GetArrayStream(id, out.AsSink(), a.offset, a.count, bar.AsCallback());
  bar.Clear();
  out.Finish();
  Report report(g.json);
  report.Field("array", ArrayInfoJson(info));
  report.Field("offset", std::to_string(a.offset));
  report.Field("element_count", std::to_string(out.elements()));
  report.Note("got " + Counted(out.elements(), DTypeName(info.dtype()) + " element") + " from " +
              std::to_string(a.offset) + " of " + ArrayIdHex(id));
  report.Print(nullptr);
  return 0;
}

}  // namespace

Command AddGetCommand(CLI::App& app, const GlobalOptions& g) {
  auto a = std::make_shared<GetArgs>();
  CLI::App* cmd = app.add_subcommand("get", "Write a resident array's elements (or a range of them) to a file");
  cmd->add_option("id", a->id, "the array's id (48 hex digits, as put prints it)")->required();
  cmd->add_option("-o,--output", a->output, "result file ('-' = stdout)");
  cmd->add_option("--out-format", a->out_format, "result format")
      ->check(CLI::IsMember({"auto", "npy", "raw", "text"}))
      ->capture_default_str();
  cmd->add_option("--offset", a->offset, "first element")->capture_default_str();
  cmd->add_option("--count", a->count, "elements from --offset (default: to the end)");
  cmd->footer(
      "Output (-o FILE, '-' = stdout): format from the extension (.npy, .bin/.raw, anything else\n"
      "text, one element per line) or --out-format. Without -o, text on stdout, but not to a\n"
      "terminal above 1000 elements and never with --json. A range past the end: OUT_OF_RANGE.");
  return {cmd, [a, &g] { return RunGet(*a, g); }};
}

}  // namespace gpuscan::cli
