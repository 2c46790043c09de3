// gpuscan compact: stable stream compaction of an array file by a flags file or a predicate;
// kept values and/or indices stream to their outputs.
#include <memory>
#include <optional>

#include "array_options.h"
#include "commands.h"
#include "lanes_option.h"
#include "names.h"
#include "progress.h"
#include "report.h"
#include "resident_args.h"
#include "shards_option.h"
#include "shm_option.h"

namespace gpuscan::cli {
namespace {

struct CompactArgs {
  ArrayArgs io;
  std::string flags;
  std::string predicate;
  std::string threshold, upper;
  std::string output_kind = "values";
  std::string indices_output;
  ResidentArgs r;  // --ref, --flags-ref, --keep: arrays the server keeps
};

v1::Predicate MakePredicate(const CompactArgs& a, v1::DType dtype) {
  v1::Predicate p;
  p.set_op(ParsePredicate(a.predicate));
  const bool needs_threshold =
      p.op() != v1::PREDICATE_OP_NONZERO && p.op() != v1::PREDICATE_OP_NOT_NAN;
  if (needs_threshold) {
    if (a.threshold.empty()) {
      throw std::runtime_error("--predicate " + a.predicate + " needs --threshold");
    }
    *p.mutable_threshold() = ParseScalar(a.threshold, dtype, "--threshold");
  }
  if (p.op() == v1::PREDICATE_OP_IN_RANGE) {
    if (a.upper.empty()) throw std::runtime_error("--predicate in_range needs --upper");
    *p.mutable_upper() = ParseScalar(a.upper, dtype, "--upper");
  }
  return p;
}

// --shm: input (and flags) loaded into regions, kept values and indices written by the server
// into regions of the worst-case size, then the kept part of each saved to its file.
ShardedCompactResult CompactThroughRegions(Client& client, const v1::CompactHeader& header, ArrayInput& in,
                                           ArrayInput* flags, const std::string& dir,
                                           std::optional<ArrayOutput>& values_out,
                                           std::optional<ArrayOutput>& indices_out) {
  const SharedRegion values = LoadRegion(in, dir);
  std::optional<SharedRegion> flag_region, kept_values, kept_indices;
  if (flags) flag_region.emplace(LoadRegion(*flags, dir));
  const uint64_t n = values.bytes() / DTypeSize(header.dtype());
  if (values_out) kept_values.emplace(SharedRegion::Create(dir, values.bytes()));
  if (indices_out) kept_indices.emplace(SharedRegion::Create(dir, n * sizeof(int64_t)));
  v1::CompactHeader once = header;
  RegisterAtOnce(once);
  const v1::CompactResponse response =
      client.CompactShared(once, values, values.bytes(), flag_region ? &*flag_region : nullptr,
                           kept_values ? &*kept_values : nullptr, kept_indices ? &*kept_indices : nullptr);
  ShardedCompactResult result;
  result.kept_count = response.kept_count();
  result.element_count = response.element_count();
  result.timing = FromProto(response.timing());
  if (values_out) SaveRegion(*kept_values, result.kept_count * DTypeSize(header.dtype()), *values_out);
  if (indices_out) SaveRegion(*kept_indices, result.kept_count * sizeof(int64_t), *indices_out);
  return result;
}

// compact --ref: the arrays the server keeps (flags by --flags-ref), compacted there; the kept
// values and indices written as a file's are, or (--keep) kept as new resident arrays whose ids
// are printed (values first), in one try.
// Kept values go to -o; indices go to -o when they are the only output, else to
// --indices-output. The kept count is unknown until the end (see ArrayOutput).
void OpenOutputs(const CompactArgs& a, const GlobalOptions& g, v1::DType dtype, std::optional<ArrayOutput>& values_out,
                 std::optional<ArrayOutput>& indices_out) {
  const v1::CompactOutput kind = ParseCompactOutput(a.output_kind);
  if (kind == v1::COMPACT_OUTPUT_VALUES_AND_INDICES && a.indices_output.empty()) {
    throw std::runtime_error("--output-kind both needs --indices-output FILE");
  }
  if (kind != v1::COMPACT_OUTPUT_INDICES) {
    values_out.emplace(ResolveOutput(a.io.output, a.io.out_format, g.json, std::nullopt), dtype, std::nullopt);
  }
  if (kind == v1::COMPACT_OUTPUT_INDICES) {
    indices_out.emplace(ResolveOutput(a.io.output, a.io.out_format, g.json, std::nullopt), v1::DTYPE_INT64,
                        std::nullopt);
  } else if (kind == v1::COMPACT_OUTPUT_VALUES_AND_INDICES) {
    OutputSpec spec;
    spec.path = a.indices_output;
    indices_out.emplace(spec, v1::DTYPE_INT64, std::nullopt);
  }
}

int RunResidentCompact(const CompactArgs& a, const GlobalOptions& g) {
  if (a.r.flags_ref.empty() && a.predicate.empty()) {
    throw std::runtime_error("compact --ref needs --flags-ref ID or --predicate");
  }
  Client client(MakeClientOptions(g));
  const ResidentArrays arrays = AskResidentArrays(client, a.r);
  const v1::ArrayInfo& info = arrays.values;
  v1::CompactHeader header;
  header.set_dtype(info.dtype());
  header.set_output(ParseCompactOutput(a.output_kind));
  header.set_element_count(info.element_count());
  if (!arrays.flags.id().empty()) {
    header.set_use_flags(true);
  } else {
    *header.mutable_predicate() = MakePredicate(a, info.dtype());
  }
  SetResident(header.mutable_resident(), a.r, arrays);
  std::optional<ArrayOutput> values_out, indices_out;
  if (!a.r.keep) OpenOutputs(a, g, info.dtype(), values_out, indices_out);
  const v1::CompactResponse last = client.CompactResident(header, values_out ? values_out->AsSink() : Sink{},
                                                          indices_out ? indices_out->AsSink() : Sink{});
  if (values_out) values_out->Finish();
  if (indices_out) indices_out->Finish();
  Report report(g.json);
  ReportKept(report, {{"values_array", &last.values_array()}, {"indices_array", &last.indices_array()}});
  report.Field("kept_count", std::to_string(last.kept_count()));
  report.Field("element_count", std::to_string(last.element_count()));
  report.Note("kept " + std::to_string(last.kept_count()) + " of " +
              Counted(last.element_count(), DTypeName(info.dtype()) + " element") + " of resident array " + a.r.ref);
  const Timing timing = FromProto(last.timing());
  report.Print(&timing);
  return 0;
}

int RunCompact(const CompactArgs& a, const GlobalOptions& g) {
  if (!a.r.ref.empty()) return RunResidentCompact(a, g);
  if (a.flags.empty() && a.predicate.empty()) {
    throw std::runtime_error("compact needs --flags FILE or --predicate");
  }
  auto in = ArrayInput::Open(MakeInputSpec(a.io));
  v1::CompactHeader header;
  header.set_dtype(in->dtype());
  header.set_output(ParseCompactOutput(a.output_kind));
  if (in->count()) header.set_element_count(*in->count());

  std::unique_ptr<ArrayInput> flags;
  if (!a.flags.empty()) {
    flags = ArrayInput::OpenFlags(a.flags);
    if (in->count() && flags->count() && *in->count() != *flags->count()) {
      throw std::runtime_error("flags " + flags->name() + " hold " +
                               std::to_string(*flags->count()) + " elements, input " +
                               in->name() + " " + std::to_string(*in->count()));
    }
    header.set_use_flags(true);
  } else {
    *header.mutable_predicate() = MakePredicate(a, in->dtype());
  }

  std::optional<ArrayOutput> values_out, indices_out;
  OpenOutputs(a, g, in->dtype(), values_out, indices_out);

  Client client(MakeClientOptions(g));
  std::optional<uint64_t> total;
  if (in->payload_bytes()) total = *in->payload_bytes() + (flags ? *in->count() : 0);
  ProgressBar bar(!g.no_progress, total);
  CheckNarrowStreamed(in->dtype(), a.io.shm, a.io.shards);
  const uint32_t lanes = IsNarrow(in->dtype()) ? 1 : ChooseLanes(a.io.lanes, in->payload_bytes(), client);
  const Sink values_sink = values_out ? values_out->AsSink() : Sink{};
  const Sink indices_sink = indices_out ? indices_out->AsSink() : Sink{};
  ShardedCompactResult result;
  if (a.io.shm) {
    result = CompactThroughRegions(client, header, *in, flags.get(), ShmDir(a.io.shm_dir, client), values_out,
                                   indices_out);
  } else if (a.io.shards > 1) {
    result = ShardedCompact(client, header, *in, flags.get(), values_sink, indices_sink, lanes, a.io.shards);
  } else {
    const Replay values_replay = in->AsReplay(), flags_replay = flags ? flags->AsReplay() : Replay{};
    const v1::CompactResponse final_response =
        values_replay && (!flags || flags_replay)  // files: retried (--retries)
            ? client.CompactStream(header, values_replay, flags_replay, values_sink, indices_sink, bar.AsCallback(),
                                   lanes)
            : client.CompactStream(header, in->AsSource(), flags ? flags->AsSource() : Source{}, values_sink,
                                   indices_sink, bar.AsCallback(), lanes);
    result.kept_count = final_response.kept_count();
    result.element_count = final_response.element_count();
    result.timing = FromProto(final_response.timing());
  }
  bar.Clear();
  if (values_out) values_out->Finish();
  if (indices_out) indices_out->Finish();

  Timing& timing = result.timing;
  Report report(g.json);
  report.Field("kept_count", std::to_string(result.kept_count));
  report.Field("element_count", std::to_string(result.element_count));
  report.Note("kept " + std::to_string(result.kept_count) + " of " +
              Counted(result.element_count, DTypeName(in->dtype()) + " element"));
  report.Print(&timing);
  return 0;
}

}  // namespace

Command AddCompactCommand(CLI::App& app, const GlobalOptions& g) {
  auto a = std::make_shared<CompactArgs>();
  CLI::App* cmd =
      AddArrayCommand(app, "compact", "Keep the elements selected by a flags file or a predicate (stable)", a->io);
  auto* flags = cmd->add_option(
      "--flags", a->flags,
      "selection flags, one per element, nonzero = keep: .npy of bool/uint8/int8, or raw bytes");
  auto* pred = cmd->add_option("--predicate", a->predicate,
                               "keep x when x <predicate> threshold (in_range: threshold <= x "
                               "< upper)")
                   ->check(CLI::IsMember(PredicateNames()));
  flags->excludes(pred);
  cmd->add_option("--threshold", a->threshold, "predicate operand, in the input's dtype");
  cmd->add_option("--upper", a->upper, "upper bound (exclusive) for in_range");
  cmd->add_option("--output-kind", a->output_kind,
                  "what to return: kept values, their int64 indices, or both")
      ->check(CLI::IsMember(CompactOutputNames()))
      ->capture_default_str();
  cmd->add_option("--indices-output", a->indices_output,
                  "file for the indices with --output-kind both (-o gets the values)");
  AddTransportOptions(cmd, a->io);
  AddResidentOptions(cmd, a->r, kFlagsRef | kKeep, {"-i", "--format", "--dtype", "--flags", "--lanes", "--shards",
                                                    "--shm"});
  cmd->get_option("--keep")->excludes(cmd->get_option("--indices-output"));
  cmd->footer(kArrayIoHelp);
  return {cmd, [a, &g] { return RunCompact(*a, g); }};
}

}  // namespace gpuscan::cli
