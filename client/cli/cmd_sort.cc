// gpuscan sort: stable sort of an array file (floats in IEEE total order), the sorted keys
// written like scan's results (-o sorted.npy, or text on stdout); --values moves a second file
// along (--values-out), --argsort writes the permutation (int64 input positions).
#include <memory>
#include <stdexcept>

#include "array_options.h"
#include "commands.h"
#include "names.h"
#include "progress.h"
#include "report.h"
#include "resident_args.h"

namespace gpuscan::cli {
namespace {

struct SortArgs {
  ArrayArgs io;
  bool descending = false;
  std::string values;      // a file of values moved with the keys
  std::string values_out;  // where they go
  std::string argsort;     // where the permutation goes
  ResidentArgs r;          // --ref, --values-ref, --keep: arrays the server keeps
};

// sort --ref: the keys (and --values-ref's values) the server keeps, sorted there; the results
// written as a file's are, or (--keep) kept as new resident arrays whose ids are printed (keys,
// then values), in one try.
int RunResidentSort(const SortArgs& a, const GlobalOptions& g) {
  const bool with_values = !a.r.values_ref.empty();
  if (with_values && !a.r.keep && a.values_out.empty()) throw std::runtime_error("--values-ref needs --values-out FILE");
  if (!with_values && !a.values_out.empty()) throw std::runtime_error("--values-out needs --values or --values-ref");
  Client client(MakeClientOptions(g));
  const ResidentArrays arrays = AskResidentArrays(client, a.r);
  const v1::ArrayInfo& info = arrays.values;
  const uint64_t n = info.element_count();
  const bool keys_wanted = a.r.keep || !a.io.output.empty() || (!with_values && a.argsort.empty());
  v1::SortHeader header;
  header.set_dtype(info.dtype());
  header.set_descending(a.descending);
  header.set_element_count(n);
  if (with_values) {
    header.set_output(v1::SORT_OUTPUT_KEYS_AND_VALUES);
    header.set_values_dtype(arrays.sort_values.dtype());
  } else if (!a.argsort.empty()) {
    header.set_output(keys_wanted ? v1::SORT_OUTPUT_KEYS_AND_INDICES : v1::SORT_OUTPUT_INDICES);
  }
  SetResident(header.mutable_resident(), a.r, arrays);
  std::unique_ptr<ArrayOutput> keys_out, values_out, indices_out;
  if (!a.r.keep) {
    if (keys_wanted) {
      keys_out = std::make_unique<ArrayOutput>(ResolveOutput(a.io.output, a.io.out_format, g.json, n), info.dtype(), n);
    }
    if (with_values) {
      values_out = std::make_unique<ArrayOutput>(ResolveOutput(a.values_out, "auto", false, n),
                                                 arrays.sort_values.dtype(), n);
    }
    if (!a.argsort.empty()) {
      indices_out = std::make_unique<ArrayOutput>(ResolveOutput(a.argsort, "auto", false, n), v1::DTYPE_INT64, n);
    }
  }
  auto sink = [](std::unique_ptr<ArrayOutput>& o) { return o ? o->AsSink() : Sink{}; };
  const v1::SortResponse last = client.SortResident(header, sink(keys_out), sink(values_out), sink(indices_out));
  for (auto* o : {&keys_out, &values_out, &indices_out}) {
    if (*o) (*o)->Finish();
  }
  Report report(g.json);
  ReportKept(report, {{"keys_array", &last.keys_array()}, {"values_array", &last.values_array()},
                      {"indices_array", &last.indices_array()}});
  report.Field("element_count", std::to_string(last.element_count()));
  report.Note("sorted " + Counted(last.element_count(), DTypeName(info.dtype()) + " key") +
              " of resident array " + a.r.ref + (a.descending ? " (descending)" : ""));
  const Timing timing = FromProto(last.timing());
  report.Print(&timing);
  return 0;
}

int RunSort(const SortArgs& a, const GlobalOptions& g) {
  if (!a.r.ref.empty()) return RunResidentSort(a, g);
  if (a.values.empty() != a.values_out.empty()) throw std::runtime_error("--values and --values-out go together");
  auto in = ArrayInput::Open(MakeInputSpec(a.io));
  std::unique_ptr<ArrayInput> values;
  if (!a.values.empty()) {
    InputSpec spec;
    spec.path = a.values;
    values = ArrayInput::Open(spec);
    if (in->count() && values->count() && *in->count() != *values->count()) {
      throw std::runtime_error("--values " + a.values + " holds " + std::to_string(*values->count()) +
                               " elements but the input holds " + std::to_string(*in->count()) + "; one value per key");
    }
  }
  const bool keys_wanted = !a.io.output.empty() || (a.values.empty() && a.argsort.empty());
  v1::SortHeader header;
  header.set_dtype(in->dtype());
  header.set_descending(a.descending);
  if (values) {
    header.set_output(v1::SORT_OUTPUT_KEYS_AND_VALUES);
    header.set_values_dtype(values->dtype());
  } else if (!a.argsort.empty()) {
    header.set_output(keys_wanted ? v1::SORT_OUTPUT_KEYS_AND_INDICES : v1::SORT_OUTPUT_INDICES);
  }
  if (in->count()) header.set_element_count(*in->count());

  std::unique_ptr<ArrayOutput> keys_out, values_out, indices_out;
  if (keys_wanted) {
    keys_out = std::make_unique<ArrayOutput>(ResolveOutput(a.io.output, a.io.out_format, g.json, in->count()),
                                             in->dtype(), in->count());
  }
  if (values) {
    values_out = std::make_unique<ArrayOutput>(ResolveOutput(a.values_out, "auto", false, in->count()),
                                               values->dtype(), in->count());
  }
  if (!a.argsort.empty()) {
    indices_out = std::make_unique<ArrayOutput>(ResolveOutput(a.argsort, "auto", false, in->count()),
                                                v1::DTYPE_INT64, in->count());
  }
  auto sink = [](std::unique_ptr<ArrayOutput>& o) { return o ? o->AsSink() : Sink{}; };
  Client client(MakeClientOptions(g));
  ProgressBar bar(!g.no_progress, in->payload_bytes());
  const Replay keys_replay = in->AsReplay();
  const Replay values_replay = values ? values->AsReplay() : Replay{};
  v1::SortResponse last;
  if (keys_replay && (!values || values_replay)) {  // files: retried (--retries)
    last = client.SortStream(header, keys_replay, values_replay, sink(keys_out), sink(values_out), sink(indices_out),
                             bar.AsCallback());
  } else {
    last = client.SortStream(header, in->AsSource(), values ? values->AsSource() : Source{}, sink(keys_out),
                             sink(values_out), sink(indices_out), bar.AsCallback());
  }
  bar.Clear();
  for (auto* o : {&keys_out, &values_out, &indices_out}) {
    if (*o) (*o)->Finish();
  }
  Timing timing = FromProto(last.timing());
  Report report(g.json);
  report.Field("element_count", std::to_string(last.element_count()));
  report.Note("sorted " + Counted(last.element_count(), DTypeName(in->dtype()) + " key") +
              (a.descending ? " (descending)" : ""));
  report.Print(&timing);
  return 0;
}

}  // namespace

Command AddSortCommand(CLI::App& app, const GlobalOptions& g) {
  auto a = std::make_shared<SortArgs>();
  CLI::App* cmd = AddArrayCommand(app, "sort",
                                  "Stable sort of an array (floats in IEEE total order: -NaN < -inf < ... "
                                  "< -0 < +0 < ... < inf < NaN)",
                                  a->io);
  cmd->add_flag("--descending", a->descending, "largest first (still stable: equal keys keep their input order)");
  CLI::Option* values = cmd->add_option("--values", a->values, "a file of values (one per key) moved with the keys");
  cmd->add_option("--values-out", a->values_out, "where the moved values go (with --values or --values-ref)");
  CLI::Option* argsort =
      cmd->add_option("--argsort", a->argsort, "write the permutation (int64 input positions) to this file")
          ->excludes(values);
  // --keep keeps the sorted keys (and with --values-ref the moved values).
  AddResidentOptions(cmd, a->r, kValuesRef | kKeep, {"-i", "--format", "--dtype", "--values"});
  cmd->get_option("--values-ref")->excludes(argsort);
  cmd->get_option("--keep")->excludes(argsort)->excludes(cmd->get_option("--values-out"));
  cmd->footer(kArrayIoHelp);
  return {cmd, [a, &g] { return RunSort(*a, g); }};
}

}  // namespace gpuscan::cli
