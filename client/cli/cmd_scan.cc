// gpuscan scan: prefix scan of an array file, results streamed to the output as they arrive.
#include <cstdio>
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

struct ScanArgs {
  ArrayArgs io;
  std::string op = "sum";
  bool exclusive = false;
  std::string algorithm = "default";
  std::string keys;   // segmented: a file of integer keys (runs of equal keys are segments)
  std::string heads;  // segmented: a file of head flags (nonzero begins a segment)
  int axis = -1;      // a matrix's axis (0: each column, 1: each row); -1: the array flat
  std::string out_dtype;  // the accumulator and result dtype (numpy's dtype=); empty: the default
  uint64_t cols = 0;  // with --axis: the row length of an input that is not a 2-D .npy
  std::string carry;  // folded into every result (ScanHeader.carry), in the results' dtype
  ResidentArgs r;     // --ref (and --keys-ref, --flags-ref, --keep): arrays the server keeps
};

// --carry: on the header once the server is known to fold it (an older server would ignore the
// field and answer the plain scan). The text is checked first, before the server is asked.
void SetCarry(Client& client, const std::string& text, v1::DType results, v1::ScanHeader* header) {
  if (text.empty()) return;
  header->set_carry(ParseCarry(text, results));
  if (!client.ServesOperation("scan_carry")) {
    throw RpcError(grpc::StatusCode::UNIMPLEMENTED,
                   "the server does not fold a carry into a scan (no \"scan_carry\" in its operations: an older "
                   "version); scan without --carry");
  }
}

// What a scan's note says of its kind and carry: ", exclusive" / ", inclusive", ", carry 5".
std::string KindNote(const ScanArgs& a) {
  return std::string(a.exclusive ? ", exclusive" : ", inclusive") + (a.carry.empty() ? "" : ", carry " + a.carry);
}

// scan --ref: the array the server keeps, scanned there (in segments by --keys-ref or
// --flags-ref; along --axis as a matrix of --cols); the result written as a file's is, or
// (--keep) kept as a new resident array whose id is printed. A keeping call is one try: a lost
// answer would leave an array behind.
int RunResidentScan(const ScanArgs& a, const GlobalOptions& g) {
  if (a.axis >= 0) {
    return RunMatrixScan(a.io, a.op, a.cols, a.axis == 0 ? v1::SCAN_AXIS_COLUMNS : v1::SCAN_AXIS_ROWS, a.exclusive,
                         a.out_dtype, g, &a.r);
  }
  Client client(MakeClientOptions(g));
  const ResidentArrays arrays = AskResidentArrays(client, a.r);  // dtypes and counts, for the header and file
  const v1::ArrayInfo& info = arrays.values;
  const v1::DType out_dtype = OutputDType(info.dtype(), a.out_dtype);  // a narrow array's accumulator
  std::optional<ArrayOutput> out;
  if (!a.r.keep) {
    out.emplace(ResolveOutput(a.io.output, a.io.out_format, g.json, info.element_count()), out_dtype,
                info.element_count());
  }
  const Sink sink = out ? out->AsSink() : Sink{};
  const bool segmented = !arrays.keys.id().empty() || !arrays.flags.id().empty();
  v1::ScanResponse last;
  if (segmented) {
    v1::SegmentedScanHeader header;
    header.set_dtype(info.dtype());
    if (out_dtype != info.dtype()) header.set_output_dtype(out_dtype);
    header.set_op(ParseOperator(a.op));
    header.set_kind(a.exclusive ? v1::SCAN_KIND_EXCLUSIVE : v1::SCAN_KIND_INCLUSIVE);
    header.set_element_count(info.element_count());
    if (!arrays.keys.id().empty()) {
      header.set_key_dtype(arrays.keys.dtype());
    } else {
      header.set_heads(true);
    }
    SetResident(header.mutable_resident(), a.r, arrays);
    last = client.SegmentedScanResident(header, sink);
  } else {
    v1::ScanHeader header;
    header.set_dtype(info.dtype());
    if (out_dtype != info.dtype()) header.set_output_dtype(out_dtype);
    header.set_op(ParseOperator(a.op));
    header.set_kind(a.exclusive ? v1::SCAN_KIND_EXCLUSIVE : v1::SCAN_KIND_INCLUSIVE);
    header.set_algorithm(ParseAlgorithm(a.algorithm));
    header.set_element_count(info.element_count());
    SetResident(header.mutable_resident(), a.r, arrays);
    SetCarry(client, a.carry, out_dtype, &header);
    last = client.ScanResident(header, sink);
  }
  if (out) out->Finish();
  Report report(g.json);
  ReportKept(report, {{"array", &last.array()}});
  report.Field("element_count", std::to_string(last.element_count()));
  report.Note("scanned " + Counted(last.element_count(), DTypeName(info.dtype()) + " element") +
              " of resident array " + a.r.ref + (segmented ? " in segments" : "") + " (" + a.op + KindNote(a) + ")");
  const Timing timing = FromProto(last.timing());
  report.Print(&timing);
  return 0;
}

// A segmented scan (--keys / --segment-heads): values and keys stream side by side.
Timing RunSegmented(const ScanArgs& a, const GlobalOptions& g, ArrayInput& in, ArrayOutput& out) {
  v1::SegmentedScanHeader header;
  header.set_dtype(in.dtype());
  header.set_op(ParseOperator(a.op));
  header.set_kind(a.exclusive ? v1::SCAN_KIND_EXCLUSIVE : v1::SCAN_KIND_INCLUSIVE);
  if (in.count()) header.set_element_count(*in.count());
  std::unique_ptr<ArrayInput> keys;
  if (!a.keys.empty()) {
    InputSpec spec;
    spec.path = a.keys;
    keys = ArrayInput::Open(spec);
    const v1::DType k = keys->dtype();
    if (k == v1::DTYPE_FLOAT32 || k == v1::DTYPE_FLOAT64) {
      throw std::runtime_error("--keys " + a.keys + " holds " + DTypeName(k) +
                               " keys; segment keys must be int32, int64, uint32 or uint64");
    }
    header.set_key_dtype(k);
  } else {
    keys = ArrayInput::OpenFlags(a.heads);
    header.set_heads(true);
  }
  if (in.count() && keys->count() && *in.count() != *keys->count()) {
    throw std::runtime_error((a.keys.empty() ? "--segment-heads " + a.heads : "--keys " + a.keys) + " holds " +
                             std::to_string(*keys->count()) + " elements but the input holds " +
                             std::to_string(*in.count()) + "; a segmented scan needs one per value");
  }
  Client client(MakeClientOptions(g));
  ProgressBar bar(!g.no_progress, in.payload_bytes());
  Timing timing;
  const Replay values_replay = in.AsReplay(), keys_replay = keys->AsReplay();
  if (values_replay && keys_replay) {  // files: retried (--retries)
    timing = client.SegmentedScanStream(header, values_replay, keys_replay, out.AsSink(), bar.AsCallback());
  } else {
    timing = client.SegmentedScanStream(header, in.AsSource(), keys->AsSource(), out.AsSink(), bar.AsCallback());
  }
  bar.Clear();
  return timing;
}

int RunScan(const ScanArgs& a, const GlobalOptions& g) {
  if (!a.r.ref.empty()) return RunResidentScan(a, g);
  if (a.axis >= 0) {
    return RunMatrixScan(a.io, a.op, a.cols, a.axis == 0 ? v1::SCAN_AXIS_COLUMNS : v1::SCAN_AXIS_ROWS, a.exclusive,
                         a.out_dtype, g);
  }
  auto in = ArrayInput::Open(MakeInputSpec(a.io));
  const v1::DType out_dtype = OutputDType(in->dtype(), a.out_dtype);
  CheckNarrowStreamed(in->dtype(), a.io.shm, a.io.shards);
  ArrayOutput out(ResolveOutput(a.io.output, a.io.out_format, g.json, in->count()), out_dtype, in->count());

  v1::ScanHeader header;
  header.set_dtype(in->dtype());
  if (out_dtype != in->dtype()) header.set_output_dtype(out_dtype);
  header.set_op(ParseOperator(a.op));
  header.set_kind(a.exclusive ? v1::SCAN_KIND_EXCLUSIVE : v1::SCAN_KIND_INCLUSIVE);
  header.set_algorithm(ParseAlgorithm(a.algorithm));
  if (in->count()) header.set_element_count(*in->count());

  const bool segmented = !a.keys.empty() || !a.heads.empty();
  Timing timing;
  if (segmented) {
    timing = RunSegmented(a, g, *in, out);
    out.Finish();
    Report report(g.json);
    report.Field("element_count", std::to_string(out.elements()));
    report.Note("scanned " + Counted(out.elements(), DTypeName(in->dtype()) + " element") + " in segments (" +
                a.op + (a.exclusive ? ", exclusive" : ", inclusive") + ")");
    report.Print(&timing);
    return 0;
  }
  Client client(MakeClientOptions(g));
  SetCarry(client, a.carry, out_dtype, &header);
  bool where_they_lie = false;  // --shm on the files themselves
  if (a.io.shm) {
    const std::string dir = ShmDir(a.io.shm_dir, client);
    RegisterAtOnce(header);
    v1::SharedMemory files = header.shared_memory();
    if (InputFileAsRegion(dir, *in, &files) && OutputFileAsRegion(dir, out, files.bytes(), &files)) {
      // Both files lie under the server's --shm-dir: it reads and writes them where they are.
      *header.mutable_shared_memory() = files;
      timing = FromProto(client.ScanHeaderOnly(header).timing());
      where_they_lie = true;
    } else {  // in place in one region: loaded from the file, scanned, written out
      SharedRegion region = LoadRegion(*in, dir);
      timing = client.ScanShared(header, region, region.bytes());
      SaveRegion(region, region.bytes(), out);
    }
  } else {
    ProgressBar bar(!g.no_progress, in->payload_bytes());
    // A narrow input or a carry: one stream (the server folds a carry into one array's results).
    const uint32_t lanes =
        IsNarrow(in->dtype()) || !a.carry.empty() ? 1 : ChooseLanes(a.io.lanes, in->payload_bytes(), client);
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
  if (where_they_lie) report.Note("read and written where the files lie, under the server's --shm-dir");
  report.Note("scanned " + Counted(out.elements(), DTypeName(in->dtype()) + " element") + " (" + a.op + KindNote(a) +
              (out_dtype != in->dtype() ? ", into " + DTypeName(out_dtype) : "") + ")");
  report.Print(&timing);
  return 0;
}

}  // namespace

Command AddScanCommand(CLI::App& app, const GlobalOptions& g) {
  auto a = std::make_shared<ScanArgs>();
  CLI::App* cmd = AddArrayCommand(app, "scan", "Prefix scan (inclusive or exclusive) of an array", a->io);
  AddOperatorOption(cmd, a->op);
  cmd->add_flag("--exclusive", a->exclusive, "exclusive scan (starts from the identity)");
  cmd->add_option("--algorithm", a->algorithm, "scan algorithm (the server lists its own: info)")
      ->check(CLI::IsMember(AlgorithmNames()))
      ->capture_default_str();
  AddTransportOptions(cmd, a->io);
  CLI::Option* keys = cmd->add_option("--keys", a->keys,
                                      "segmented scan: integer keys, one per element (.npy, text, or raw with "
                                      "its dtype in a .npy); each run of equal keys is scanned on its own");
  CLI::Option* heads = cmd->add_option("--segment-heads", a->heads,
                                       "segmented scan: head flags, one per element (.npy of bool/uint8/int8 "
                                       "or raw bytes); a nonzero flag begins a segment");
  keys->excludes(heads);
  CLI::Option* out_dtype = cmd->add_option("--out-dtype", a->out_dtype,
                                           "accumulator and result dtype, as numpy's dtype= (int8/uint8/int16/uint16/"
                                           "float16 inputs; default int64, uint64, float16)")
                               ->check(CLI::IsMember(DTypeNames()));
  CLI::Option* axis = cmd->add_option("--axis", a->axis,
                                      "scan a matrix (a 2-D .npy, or --cols) along axis 0 (each column) or 1 (each "
                                      "row), as numpy's cumsum(m, axis)")
                          ->check(CLI::Range(0, 1));
  CLI::Option* carry = cmd->add_option("--carry", a->carry,
                                       "fold VALUE into every result after the scan (op(VALUE, scan[i]); an "
                                       "exclusive scan starts at VALUE), in the results' dtype: to go on from an "
                                       "earlier piece's total");
  cmd->add_option("--cols", a->cols, "with --axis: the row length, for inputs that are not a 2-D .npy")
      ->check(CLI::PositiveNumber)
      ->needs(axis);
  // Segmented and matrix scans run as one streamed call with the default algorithm.
  for (CLI::Option* one : {keys, heads, axis}) {
    for (const char* other : {"--algorithm", "--lanes", "--shards", "--shm"}) one->excludes(cmd->get_option(other));
  }
  axis->excludes(keys)->excludes(heads);
  // A carry: one array's plain scan on one stream.
  for (CLI::Option* o : {keys, heads, axis}) carry->excludes(o);
  for (const char* other : {"--lanes", "--shards"}) carry->excludes(cmd->get_option(other));
  for (CLI::Option* o : {keys, heads}) out_dtype->excludes(o);
  // --ref: segments by --keys-ref or --flags-ref (head flags), a matrix by --axis and --cols.
  AddResidentOptions(cmd, a->r, kFlagsRef | kKeysRef | kKeep,
                     {"-i", "--format", "--dtype", "--lanes", "--shards", "--shm", "--keys", "--segment-heads"});
  cmd->get_option("--keys-ref")->excludes(cmd->get_option("--flags-ref"))->excludes(axis)->excludes(carry);
  cmd->get_option("--flags-ref")->excludes(carry);
  cmd->get_option("--flags-ref")->excludes(axis);
  cmd->footer(kArrayIoHelp);
  return {cmd, [a, &g] { return RunScan(*a, g); }};
}

}  // namespace gpuscan::cli
