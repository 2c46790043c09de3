// gpuscan drop: frees a resident array (DropArray).
#include <memory>

#include "commands.h"
#include "report.h"
#include "resident_info.h"

namespace gpuscan::cli {
namespace {

int RunDrop(const std::string& hex, const GlobalOptions& g) {
  const std::string id = ParseArrayId(hex, "ID");
  Client client(MakeClientOptions(g));
  const v1::ArrayInfo info = client.DropArray(id);  // not retried: a second try would find it gone
  Report report(g.json);
  report.Field("dropped", ArrayInfoJson(info));
  report.Note("dropped " + ArrayInfoText(info));
  report.Print(nullptr);
  return 0;
}

}  // namespace

Command AddDropCommand(CLI::App& app, const GlobalOptions& g) {
  auto id = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand("drop", "Free a resident array (once the calls using it have ended)");
  cmd->add_option("id", *id, "the array's id (48 hex digits)")->required();
  return {cmd, [id, &g] { return RunDrop(*id, g); }};
}

}  // namespace gpuscan::cli
