// gpuscan put: uploads an array file as a resident array (PutArray); prints its id.
#include <cstdio>
#include <memory>

#include "array_input.h"
#include "commands.h"
#include "names.h"
#include "progress.h"
#include "report.h"
#include "resident_info.h"

namespace gpuscan::cli {
namespace {

struct PutArgs {
  std::string input = "-";
  std::string format = "auto";
  std::string dtype;
  uint64_t ttl_ms = 0;
  std::string label;
};

int RunPut(const PutArgs& a, const GlobalOptions& g) {
  InputSpec spec;
  spec.path = a.input;
  spec.format = ParseFormat(a.format);
  if (!a.dtype.empty()) spec.dtype = ParseDType(a.dtype);
  auto in = ArrayInput::Open(spec);
  v1::PutArrayHeader header;
  header.set_dtype(in->dtype());
  if (in->count()) header.set_element_count(*in->count());
  header.set_ttl_ms(a.ttl_ms);
  header.set_label(a.label);
  Client client(MakeClientOptions(g));
  ProgressBar bar(!g.no_progress, in->payload_bytes());
  // Not retried: a try whose answer was lost would leave an array behind.
  const v1::ArrayInfo info = client.PutStream(header, in->AsSource(), bar.AsCallback());
  bar.Clear();
  Report report(g.json);
  report.Field("array", ArrayInfoJson(info));
  report.Note("put " + ArrayInfoText(info));
  if (!g.json) std::printf("%s\n", ArrayIdHex(info.id()).c_str());
  std::fflush(stdout);
  report.Print(nullptr);
  return 0;
}

}  // namespace

Command AddPutCommand(CLI::App& app, const GlobalOptions& g) {
  auto a = std::make_shared<PutArgs>();
  CLI::App* cmd = app.add_subcommand(
      "put", "Upload an array file as a resident array kept by the server (--resident-bytes); prints its id");
  cmd->add_option("file", a->input, "array file ('-' = stdin)")->capture_default_str();
  cmd->add_option("--format", a->format, "input format")
      ->check(CLI::IsMember({"auto", "npy", "raw", "text"}))
      ->capture_default_str();
  cmd->add_option("--dtype", a->dtype, "element type of raw/text input (text: int64 if absent)")
      ->check(CLI::IsMember(DTypeNames()));
  cmd->add_option("--ttl-ms", a->ttl_ms,
                  "idle time after which the server drops the array; every use renews it (0 = the server's "
                  "--resident-ttl-ms, which also caps it)")
      ->capture_default_str();
  cmd->add_option("--label", a->label, "a name for it (at most 128 bytes), shown by `gpuscan arrays`");
  cmd->footer(
      "The id (48 hex digits) goes to stdout alone, the array's info to stderr (with --json, both in\n"
      "one JSON object on stdout). Use the id with get, drop, and scan/reduce --ref. Arrays belong\n"
      "to the caller's tenant (--tenant, or the mutual-TLS certificate). Not retried.");
  return {cmd, [a, &g] { return RunPut(*a, g); }};
}

}  // namespace gpuscan::cli
