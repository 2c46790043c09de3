// gpuscan histogram: counts of an array file's elements in numpy.histogram's bins, written like
// scan's results (-o counts.npy, or text on stdout); the edges the server used go to --edges-out.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <sstream>
#include <stdexcept>

#include "array_options.h"
#include "commands.h"
#include "gpuscan/json.h"
#include "names.h"
#include "progress.h"
#include "report.h"
#include "resident_args.h"

namespace gpuscan::cli {
namespace {

struct HistogramArgs {
  ArrayArgs io;
  uint32_t bins = 10;
  std::vector<double> range;  // LO,HI; empty: the input's min and max (numpy's default)
  std::string edges;          // a file of explicit edges (any dtype, converted to float64)
  std::string edges_out;
  ResidentArgs r;  // --ref: the array the server keeps
};

// Every element of a (small) array file, as float64.
std::vector<double> ReadEdges(const std::string& path) {
  InputSpec spec;
  spec.path = path;
  auto in = ArrayInput::Open(spec);
  std::vector<unsigned char> raw;
  unsigned char buf[1 << 16];
  for (size_t got; (got = in->Read(buf, sizeof buf)) > 0;) raw.insert(raw.end(), buf, buf + got);
  std::vector<double> out(raw.size() / in->element_size());
  for (size_t i = 0; i < out.size(); ++i) out[i] = ElementAsDouble(raw.data() + i * in->element_size(), in->dtype());
  return out;
}

// numpy's default range: the input's min and max (two reductions on the server: `reduce` runs
// one, over the file opened apart, so it is read three times, or the resident array), widened by
// 0.5 each side when they are equal; (0, 1) when it is empty.
std::pair<double, double> AutoRange(v1::DType dtype, const std::function<v1::ReduceResponse(v1::ReduceHeader)>& reduce) {
  auto extreme = [&](v1::Operator op) {
    v1::ReduceHeader h;
    h.set_dtype(dtype);
    h.set_op(op);
    const v1::ReduceResponse r = reduce(h);
    // The value's own dtype: a narrow input's MIN/MAX leaves in its output dtype (int64 for int8).
    const double v = r.value().has_float_value() ? r.value().float_value()
                     : r.value().has_int_value() ? static_cast<double>(r.value().int_value())
                                                 : static_cast<double>(r.value().uint_value());
    return std::make_pair(v, r.element_count());
  };
  const auto [lo, count] = extreme(v1::OPERATOR_MIN);
  if (count == 0) return {0.0, 1.0};
  const double hi = extreme(v1::OPERATOR_MAX).first;
  if (!std::isfinite(lo) || !std::isfinite(hi)) {
    std::ostringstream what;
    what << "autodetected range of [" << lo << ", " << hi << "] is not finite; give --range LO,HI";
    throw std::runtime_error(what.str());
  }
  if (lo == hi) return {lo - 0.5, hi + 0.5};
  return {lo, hi};
}

void WriteArray(const std::string& path, const std::string& format, bool json, v1::DType dtype, const void* data,
                size_t count) {
  ArrayOutput out(ResolveOutput(path, format, json, count), dtype, count);
  out.Write(data, count * DTypeSize(dtype));
  out.Finish();
}

int RunHistogram(const HistogramArgs& a, const GlobalOptions& g) {
  const InputSpec spec = MakeInputSpec(a.io);
  Client client(MakeClientOptions(g));
  const bool remote = !a.r.ref.empty();  // --ref: the array the server keeps, counted there
  std::unique_ptr<ArrayInput> in;
  ResidentArrays arrays;
  if (remote) {
    arrays = AskResidentArrays(client, a.r);
  } else {
    in = ArrayInput::Open(spec);
  }
  const v1::DType dtype = remote ? arrays.values.dtype() : in->dtype();
  HistogramBins bins;
  if (!a.edges.empty()) {
    bins.edges = ReadEdges(a.edges);
  } else if (!a.range.empty()) {
    bins.bins = a.bins;
    std::tie(bins.lo, bins.hi) = std::make_pair(a.range[0], a.range[1]);
  } else {
    bins.bins = a.bins;
    std::unique_ptr<ArrayInput> again = remote ? nullptr : ArrayInput::Open(spec);
    const Replay replay = again ? again->AsReplay() : Replay{};
    if (!remote && !replay) {
      throw std::runtime_error("--range LO,HI is needed when the input is read once (stdin or a pipe)");
    }
    std::tie(bins.lo, bins.hi) = AutoRange(dtype, [&](v1::ReduceHeader h) {
      if (!remote) return client.ReduceStream(h, replay);
      h.set_element_count(arrays.values.element_count());
      h.mutable_resident()->set_values(arrays.values.id());
      return client.ReduceResident(h);
    });
  }
  v1::HistogramHeader header = HistogramHeaderFor(dtype, bins);
  if (remote) {
    header.set_element_count(arrays.values.element_count());
    SetResident(header.mutable_resident(), a.r, arrays);
  } else if (in->count()) {
    header.set_element_count(*in->count());
  }

  ProgressBar bar(!g.no_progress, remote ? std::nullopt : in->payload_bytes());
  const Replay replay = remote ? Replay{} : in->AsReplay();  // a file: retried (--retries)
  const v1::HistogramResponse response = remote   ? client.HistogramResident(header)
                                         : replay ? client.HistogramStream(header, replay, bar.AsCallback())
                                                  : client.HistogramStream(header, in->AsSource(), bar.AsCallback());
  bar.Clear();
  HistogramResult result = ToHistogramResult(response);

  WriteArray(a.io.output, a.io.out_format, g.json, v1::DTYPE_UINT64, result.counts.data(), result.counts.size());
  if (!a.edges_out.empty()) WriteArray(a.edges_out, "auto", false, v1::DTYPE_FLOAT64, result.edges.data(), result.edges.size());
  Report report(g.json);
  report.Field("bins", std::to_string(result.counts.size()));
  report.Field("below", std::to_string(result.below));
  report.Field("above", std::to_string(result.above));
  report.Field("nan_count", std::to_string(result.nan_count));
  report.Field("element_count", std::to_string(result.element_count));
  report.Field("dtype", JsonQuote(DTypeName(dtype)));
  report.Field("lo", JsonNumber(result.edges.front()));
  report.Field("hi", JsonNumber(result.edges.back()));
  report.Note("counted " + Counted(result.element_count, DTypeName(dtype) + " element") +
              (remote ? " of resident array " + a.r.ref : "") + " in " +
              Counted(result.counts.size(), "bin") + " over [" + JsonNumber(result.edges.front()) + ", " +
              JsonNumber(result.edges.back()) + "] (below " + std::to_string(result.below) + ", above " +
              std::to_string(result.above) + ", NaN " + std::to_string(result.nan_count) + ")");
  report.Print(&result.timing);
  return 0;
}

}  // namespace

Command AddHistogramCommand(CLI::App& app, const GlobalOptions& g) {
  auto a = std::make_shared<HistogramArgs>();
  CLI::App* cmd = AddArrayCommand(
      app, "histogram", "Count an array's elements in bins (numpy.histogram's semantics); counts (uint64) to -o", a->io);
  auto* bins = cmd->add_option("--bins", a->bins, "even bins over --range")->capture_default_str();
  auto* range = cmd->add_option("--range", a->range, "LO,HI of the even bins (default: the input's min and max)")
                    ->delimiter(',')
                    ->expected(2);
  cmd->add_option("--edges", a->edges, "array file of explicit bin edges (bins+1, non-decreasing)")
      ->excludes(bins)
      ->excludes(range);
  cmd->add_option("--edges-out", a->edges_out, "also write the edges used (float64) to this file");
  AddResidentOptions(cmd, a->r, 0, {"-i", "--format", "--dtype"});  // counts are no array to keep
  cmd->footer(kArrayIoHelp);
  return {cmd, [a, &g] { return RunHistogram(*a, g); }};
}

}  // namespace gpuscan::cli
