// gpuscan scan: prefix scan of an array file, results streamed to the output as they arrive.
#include <memory>

#include "array_options.h"
#include "commands.h"
#include "lanes_option.h"
#include "names.h"
#include "progress.h"
#include "report.h"
#include "shards_option.h"
#include "shm_option.h"

namespace gpuscan::cli {
namespace {

struct ScanArgs {
  ArrayArgs io;
  std::string op = "sum";
  bool exclusive = false;
  std::string algorithm = "default";
};

int RunScan(const ScanArgs& a, const GlobalOptions& g) {
  auto in = ArrayInput::Open(MakeInputSpec(a.io));
  ArrayOutput out(ResolveOutput(a.io.output, a.io.out_format, g.json, in->count()), in->dtype(),
                  in->count());

  v1::ScanHeader header;
  header.set_dtype(in->dtype());
  header.set_op(ParseOperator(a.op));
  header.set_kind(a.exclusive ? v1::SCAN_KIND_EXCLUSIVE : v1::SCAN_KIND_INCLUSIVE);
  header.set_algorithm(ParseAlgorithm(a.algorithm));
  if (in->count()) header.set_element_count(*in->count());

  Client client(MakeClientOptions(g));
  Timing timing;
  if (a.io.shm) {  // in place in one region: loaded from the file, scanned, written out
    SharedRegion region = LoadRegion(*in, ShmDir(a.io.shm_dir, client));
    timing = client.ScanShared(header, region, region.bytes());
    SaveRegion(region, region.bytes(), out);
  } else {
    ProgressBar bar(!g.no_progress, in->payload_bytes());
    const uint32_t lanes = ChooseLanes(a.io.lanes, in->payload_bytes(), client);
    if (a.io.shards > 1) {
      timing = ShardedScan(client, header, *in, out.AsSink(), lanes, a.io.shards);
    } else if (const Replay replay = in->AsReplay()) {  // a file: retried (--retries)
      timing = client.ScanStream(header, replay, out.AsSink(), bar.AsCallback(), lanes);
    } else {
      timing = client.ScanStream(header, in->AsSource(), out.AsSink(), bar.AsCallback(), lanes);
    }
    bar.Clear();
  }
  out.Finish();

  Report report(g.json);
  report.Field("element_count", std::to_string(out.elements()));
  report.Note("scanned " + std::to_string(out.elements()) + " " + DTypeName(in->dtype()) +
              " elements (" + a.op + (a.exclusive ? ", exclusive" : ", inclusive") + ")");
  report.Print(&timing);
  return 0;
}

}  // namespace

Command AddScanCommand(CLI::App& app, const GlobalOptions& g) {
  auto a = std::make_shared<ScanArgs>();
  CLI::App* cmd = app.add_subcommand("scan", "Prefix scan (inclusive or exclusive) of an array");
  AddInputOptions(cmd, a->io);
  AddOutputOptions(cmd, a->io);
  cmd->add_option("--op", a->op, "operator")
      ->check(CLI::IsMember(OperatorNames()))
      ->capture_default_str();
  cmd->add_flag("--exclusive", a->exclusive, "exclusive scan (starts from the identity)");
  cmd->add_option("--algorithm", a->algorithm, "scan algorithm (the server lists its own: info)")
      ->check(CLI::IsMember(AlgorithmNames()))
      ->capture_default_str();
  AddLanesOption(cmd, a->io.lanes);
  AddShardsOption(cmd, a->io.shards);
  AddShmOption(cmd, a->io.shm, a->io.shm_dir);
  cmd->footer(kArrayIoHelp);
  return {cmd, [a, &g] { return RunScan(*a, g); }};
}

}  // namespace gpuscan::cli
