// gpuscan scan2d: the 2-D inclusive scan (summed-area table) of a matrix file, and the matrix
// scans of `gpuscan scan --axis` (each column or each row on its own). A 2-D .npy gives its
// shape; other inputs (raw, text, a 1-D .npy) need --cols. The result is written like scan's
// results, a .npy keeping the (rows, cols) shape.
#include <memory>
#include <optional>
#include <stdexcept>

#include "array_options.h"
#include "commands.h"
#include "names.h"
#include "progress.h"
#include "report.h"
#include "resident_args.h"

namespace gpuscan::cli {
namespace {

struct Scan2DArgs {
  ArrayArgs io;
  std::string op = "sum";
  uint64_t cols = 0;  // 0: from the .npy's shape
  ResidentArgs r;     // --ref, --keep: the matrix the server keeps
};

// A resident matrix's columns: --cols, which must cut its elements into whole rows.
uint64_t ResidentColumns(const v1::ArrayInfo& info, uint64_t cols_option) {
  if (cols_option == 0) throw std::runtime_error("--ref names a 1-D array: give the row length with --cols");
  if (info.element_count() % cols_option != 0) {
    throw std::runtime_error("--ref holds " + std::to_string(info.element_count()) +
                             " elements, not a whole number of rows of --cols " + std::to_string(cols_option));
  }
  return cols_option;
}

// The matrix's columns: the .npy's second dimension, or --cols (which must agree with it).
uint64_t ColumnsOf(const ArrayInput& in, uint64_t cols_option) {
  const std::vector<uint64_t>& shape = in.shape();
  if (shape.size() > 2) {
    throw std::runtime_error(in.name() + " has " + std::to_string(shape.size()) + " dimensions; scan2d takes a matrix");
  }
  if (shape.size() == 2) {
    if (cols_option && cols_option != shape[1]) {
      throw std::runtime_error("--cols " + std::to_string(cols_option) + " conflicts with " + in.name() +
                               ", a matrix of " + std::to_string(shape[1]) + " columns");
    }
    if (shape[1] == 0) throw std::runtime_error(in.name() + " has 0 columns; scan2d needs at least one");
    return shape[1];
  }
  if (cols_option == 0) {
    throw std::runtime_error(in.name() + " is not a 2-D .npy: give the row length with --cols");
  }
  if (in.count() && *in.count() % cols_option != 0) {
    throw std::runtime_error(in.name() + " holds " + std::to_string(*in.count()) +
                             " elements, not a whole number of rows of --cols " + std::to_string(cols_option));
  }
  return cols_option;
}

}  // namespace

int RunMatrixScan(const ArrayArgs& io, const std::string& op, uint64_t cols_option, v1::ScanAxis axis,
                  bool exclusive, const std::string& out_dtype_option, const GlobalOptions& g,
                  const ResidentArgs* resident) {
  Client client(MakeClientOptions(g));
  const bool remote = resident && !resident->ref.empty();
  std::unique_ptr<ArrayInput> in;
  ResidentArrays arrays;
  if (remote) {
    arrays = AskResidentArrays(client, *resident);
  } else {
    in = ArrayInput::Open(MakeInputSpec(io));
  }
  const v1::DType dtype = remote ? arrays.values.dtype() : in->dtype();
  const std::optional<uint64_t> count = remote ? std::optional<uint64_t>(arrays.values.element_count()) : in->count();
  const uint64_t cols = remote ? ResidentColumns(arrays.values, cols_option) : ColumnsOf(*in, cols_option);
  v1::Scan2DHeader header;
  header.set_dtype(dtype);
  header.set_op(ParseOperator(op));
  header.set_cols(cols);
  header.set_axis(axis);
  header.set_kind(exclusive ? v1::SCAN_KIND_EXCLUSIVE : v1::SCAN_KIND_INCLUSIVE);
  if (count) header.set_rows(*count / cols);
  if (remote) SetResident(header.mutable_resident(), *resident, arrays);
  // A narrow matrix accumulates in --out-dtype (numpy's dtype=; default int64, uint64, float16).
  const v1::DType out_dtype = OutputDType(dtype, out_dtype_option);
  if (out_dtype != dtype) header.set_output_dtype(out_dtype);
  if (axis != v1::SCAN_AXIS_BOTH && !client.ServesOperation("scan_axis")) {
    throw std::runtime_error("the server does not serve scans along an axis (no scan_axis in its operations: "
                             "an older version)");
  }
  if (remote && resident->keep) {  // one try: a lost answer would leave an array behind
    const v1::ScanResponse last = client.Scan2DResident(header);
    Report report(g.json);
    ReportKept(report, {{"array", &last.array()}});
    const Timing timing = FromProto(last.timing());
    report.Print(&timing);
    return 0;
  }
  ArrayOutput out(ResolveOutput(io.output, io.out_format, g.json, count), out_dtype, count, cols);
  ProgressBar bar(!g.no_progress, remote ? std::nullopt : in->payload_bytes());
  uint64_t received = 0;  // bytes of the table (each once, retries included)
  Sink sink = [&received, write = out.AsSink()](const void* p, size_t b) {
    received += b;
    write(p, b);
  };
  const Replay replay = remote ? Replay{} : in->AsReplay();
  const Timing timing = remote   ? FromProto(client.Scan2DResident(header, sink).timing())
                        : replay ? client.Scan2DStream(header, replay, sink, bar.AsCallback())
                                 : client.Scan2DStream(header, in->AsSource(), sink, bar.AsCallback());
  bar.Clear();
  out.Finish();
  const uint64_t n = received / DTypeSize(out_dtype);
  Report report(g.json);
  report.Field("rows", std::to_string(n / cols));
  report.Field("cols", std::to_string(cols));
  const std::string what = axis == v1::SCAN_AXIS_BOTH ? "summed-area table"
                           : std::string(axis == v1::SCAN_AXIS_COLUMNS ? "scan of each column" : "scan of each row") +
                                 (exclusive ? ", exclusive" : ", inclusive");
  report.Note(what + " (" + OperatorName(header.op()) + ") of " + std::to_string(n / cols) + " x " +
              std::to_string(cols) + " " + DTypeName(dtype) + (remote ? " of resident array " + resident->ref : ""));
  report.Print(&timing);
  return 0;
}

namespace {

int RunScan2D(const Scan2DArgs& a, const GlobalOptions& g) {
  return RunMatrixScan(a.io, a.op, a.cols, v1::SCAN_AXIS_BOTH, false, "", g, &a.r);
}

}  // namespace

Command AddScan2DCommand(CLI::App& app, const GlobalOptions& g) {
  auto a = std::make_shared<Scan2DArgs>();
  CLI::App* cmd =
      AddArrayCommand(app, "scan2d", "2-D inclusive scan (summed-area table) of a row-major matrix", a->io);
  AddOperatorOption(cmd, a->op);
  cmd->add_option("--cols", a->cols, "row length, for inputs that are not a 2-D .npy (and --ref)")
      ->check(CLI::PositiveNumber);
  AddResidentOptions(cmd, a->r, kKeep, {"-i", "--format", "--dtype"});
  cmd->footer(kArrayIoHelp);
  return {cmd, [a, &g] { return RunScan2D(*a, g); }};
}

}  // namespace gpuscan::cli
