// gpuscan reduce: reduction of an array file to one value, printed on stdout; with --by-key,
// one value per run of equal keys, written like scan's results.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <stdexcept>

#include "array_options.h"
#include "commands.h"
#include "lanes_option.h"
#include "gpuscan/json.h"
#include "names.h"
#include "progress.h"
#include "report.h"
#include "resident_args.h"
#include "shards_option.h"
#include "shm_option.h"
#include "text_format.h"

namespace gpuscan::cli {
namespace {

struct ReduceArgs {
  ArrayArgs io;
  std::string op = "sum";
  std::string by_key;    // reduce by key: a file of integer keys, one per element
  std::string keys_out;  // reduce by key: where the runs' keys go
  std::string out_dtype;  // the accumulator and value's dtype (numpy's dtype=); empty: the default
  ResidentArgs r;         // --ref (--keys-ref, --keep): arrays the server keeps
};

// The reduced value as one raw element: raw_value when the server sent it, else the Scalar.
std::string RawValue(const v1::ReduceResponse& r, v1::DType dtype) {
  if (r.raw_value().size() == DTypeSize(dtype)) return r.raw_value();
  std::string raw(DTypeSize(dtype), '\0');
  auto put = [&](auto v) { std::memcpy(raw.data(), &v, sizeof v); };
  const v1::Scalar& s = r.value();
  double f = s.float_value();
  int64_t i = s.value_case() == v1::Scalar::kUintValue ? static_cast<int64_t>(s.uint_value())
                                                       : s.int_value();
  switch (dtype) {
    case v1::DTYPE_INT32: put(static_cast<int32_t>(i)); break;
    case v1::DTYPE_INT64: put(i); break;
    case v1::DTYPE_UINT32: put(static_cast<uint32_t>(i)); break;
    case v1::DTYPE_UINT64: put(static_cast<uint64_t>(i)); break;
    case v1::DTYPE_FLOAT32: put(static_cast<float>(f)); break;
    case v1::DTYPE_FLOAT64: put(f); break;
    default: break;
  }
  return raw;
}

// JSON has no NaN or infinities: those become strings (see JsonNumber).
std::string JsonElement(const std::string& raw, v1::DType dtype) {
  if (dtype == v1::DTYPE_FLOAT32 || dtype == v1::DTYPE_FLOAT64) {
    double v;
    if (dtype == v1::DTYPE_FLOAT32) {
      float f;
      std::memcpy(&f, raw.data(), 4);
      v = f;
    } else {
      std::memcpy(&v, raw.data(), 8);
    }
    if (!std::isfinite(v)) return JsonNumber(v);
  }
  return FormatElement(raw.data(), dtype);
}

// Reduce by key (--by-key): one value per run of equal consecutive keys, to -o (text on stdout
// by default, as scan's); the runs' keys to --keys-out.
int RunReduceByKey(const ReduceArgs& a, const GlobalOptions& g, ArrayInput& in) {
  InputSpec spec;
  spec.path = a.by_key;
  auto keys = ArrayInput::Open(spec);
  const v1::DType k = keys->dtype();
  if (k == v1::DTYPE_FLOAT32 || k == v1::DTYPE_FLOAT64) {
    throw std::runtime_error("--by-key " + a.by_key + " holds " + DTypeName(k) +
                             " keys; keys must be int32, int64, uint32 or uint64");
  }
  if (in.count() && keys->count() && *in.count() != *keys->count()) {
    throw std::runtime_error("--by-key " + a.by_key + " holds " + std::to_string(*keys->count()) +
                             " keys but the input holds " + std::to_string(*in.count()) + " elements; one key per value");
  }
  v1::ReduceByKeyHeader header;
  header.set_dtype(in.dtype());
  header.set_op(ParseOperator(a.op));
  header.set_key_dtype(k);
  if (in.count()) header.set_element_count(*in.count());
  // The run count is unknown until the end: no expected count for the outputs.
  ArrayOutput values_out(ResolveOutput(a.io.output, a.io.out_format, g.json, std::nullopt), in.dtype(), std::nullopt);
  std::unique_ptr<ArrayOutput> keys_out;
  if (!a.keys_out.empty()) keys_out = std::make_unique<ArrayOutput>(ResolveOutput(a.keys_out, "auto", false, std::nullopt), k, std::nullopt);
  Sink keys_sink = keys_out ? keys_out->AsSink() : Sink{};
  Client client(MakeClientOptions(g));
  ProgressBar bar(!g.no_progress, in.payload_bytes());
  const Replay values_replay = in.AsReplay(), keys_replay = keys->AsReplay();
  const v1::ReduceByKeyResponse last =
      values_replay && keys_replay  // files: retried (--retries)
          ? client.ReduceByKeyStream(header, values_replay, keys_replay, keys_sink, values_out.AsSink(), bar.AsCallback())
          : client.ReduceByKeyStream(header, in.AsSource(), keys->AsSource(), keys_sink, values_out.AsSink(),
                                     bar.AsCallback());
  bar.Clear();
  values_out.Finish();
  if (keys_out) keys_out->Finish();
  Timing timing = FromProto(last.timing());
  Report report(g.json);
  report.Field("run_count", std::to_string(last.run_count()));
  report.Field("element_count", std::to_string(last.element_count()));
  report.Note("reduced " + Counted(last.element_count(), DTypeName(in.dtype()) + " element") + " by key to " +
              Counted(last.run_count(), "run") + " (" + a.op + ")");
  report.Print(&timing);
  return 0;
}

int PrintReduced(const ReduceArgs& a, const GlobalOptions& g, ShardedReduceResult& result, v1::DType in_dtype,
                 v1::DType out_dtype);
int RunResidentReduce(const ReduceArgs& a, const GlobalOptions& g);

int RunReduce(const ReduceArgs& a, const GlobalOptions& g) {
  const bool by_key = !a.by_key.empty() || !a.r.keys_ref.empty();
  if (!by_key && (!a.io.output.empty() || !a.keys_out.empty())) {
    throw std::runtime_error("-o and --keys-out write a reduction by key's runs: they need --by-key or --keys-ref");
  }
  if (a.r.keep && a.r.keys_ref.empty()) {
    throw std::runtime_error("--keep keeps a reduction by key's runs (--keys-ref): a reduction's value is no array");
  }
  if (!a.r.ref.empty()) return RunResidentReduce(a, g);
  auto in = ArrayInput::Open(MakeInputSpec(a.io));
  if (!a.by_key.empty()) return RunReduceByKey(a, g, *in);
  v1::ReduceHeader header;
  header.set_dtype(in->dtype());
  header.set_op(ParseOperator(a.op));
  if (in->count()) header.set_element_count(*in->count());
  const v1::DType out_dtype = OutputDType(in->dtype(), a.out_dtype);
  if (out_dtype != in->dtype()) header.set_output_dtype(out_dtype);
  CheckNarrowStreamed(in->dtype(), a.io.shm, a.io.shards);

  Client client(MakeClientOptions(g));
  ProgressBar bar(!g.no_progress, in->payload_bytes());
  const uint32_t lanes = IsNarrow(in->dtype()) ? 1 : ChooseLanes(a.io.lanes, in->payload_bytes(), client);
  ShardedReduceResult result;
  if (a.io.shm) {
    const std::string dir = ShmDir(a.io.shm_dir, client);
    RegisterAtOnce(header);
    v1::ReduceResponse response;
    if (InputFileAsRegion(dir, *in, header.mutable_shared_memory())) {  // read where it lies
      response = client.ReduceHeaderOnly(header);
    } else {
      const SharedRegion region = LoadRegion(*in, dir);
      response = client.ReduceShared(header, region, region.bytes());
    }
    result.raw_value = RawValue(response, out_dtype);
    result.element_count = response.element_count();
    result.timing = FromProto(response.timing());
  } else if (a.io.shards > 1) {
    result = ShardedReduce(client, header, *in, lanes, a.io.shards);
  } else {
    const Replay replay = in->AsReplay();  // a file: retried (--retries)
    const v1::ReduceResponse response = replay ? client.ReduceStream(header, replay, bar.AsCallback(), lanes)
                                               : client.ReduceStream(header, in->AsSource(), bar.AsCallback(), lanes);
    result.raw_value = RawValue(response, out_dtype);
    result.element_count = response.element_count();
    result.timing = FromProto(response.timing());
  }
  bar.Clear();
  return PrintReduced(a, g, result, in->dtype(), out_dtype);
}

// reduce --ref: the array the server keeps, reduced there (by the runs of --keys-ref's keys: the
// runs written as --by-key's are, or with --keep kept as new resident arrays whose ids are
// printed, keys then values, in one try).
int RunResidentReduce(const ReduceArgs& a, const GlobalOptions& g) {
  Client client(MakeClientOptions(g));
  const ResidentArrays arrays = AskResidentArrays(client, a.r);  // dtypes and counts, for the header
  const v1::ArrayInfo& info = arrays.values;
  const v1::DType out_dtype = OutputDType(info.dtype(), a.out_dtype);  // a narrow array's accumulator
  if (!arrays.keys.id().empty()) {
    v1::ReduceByKeyHeader header;
    header.set_dtype(info.dtype());
    if (out_dtype != info.dtype()) header.set_output_dtype(out_dtype);
    header.set_op(ParseOperator(a.op));
    header.set_key_dtype(arrays.keys.dtype());
    header.set_element_count(info.element_count());
    SetResident(header.mutable_resident(), a.r, arrays);
    std::optional<ArrayOutput> values_out, keys_out;
    if (!a.r.keep) {  // (resident keys are 4- or 8-byte integers: the server refuses narrower ones)
      values_out.emplace(ResolveOutput(a.io.output, a.io.out_format, g.json, std::nullopt), out_dtype, std::nullopt);
      if (!a.keys_out.empty()) {
        keys_out.emplace(ResolveOutput(a.keys_out, "auto", false, std::nullopt), arrays.keys.dtype(), std::nullopt);
      }
    }
    const v1::ReduceByKeyResponse last = client.ReduceByKeyResident(
        header, keys_out ? keys_out->AsSink() : Sink{}, values_out ? values_out->AsSink() : Sink{});
    if (values_out) values_out->Finish();
    if (keys_out) keys_out->Finish();
    Report report(g.json);
    ReportKept(report, {{"keys_array", &last.keys_array()}, {"values_array", &last.values_array()}});
    report.Field("run_count", std::to_string(last.run_count()));
    report.Field("element_count", std::to_string(last.element_count()));
    report.Note("reduced " + Counted(last.element_count(), DTypeName(info.dtype()) + " element") +
                " of resident array " + a.r.ref + " by key to " + Counted(last.run_count(), "run") +
                " (" + a.op + ")");
    const Timing timing = FromProto(last.timing());
    report.Print(&timing);
    return 0;
  }
  v1::ReduceHeader header;
  header.set_dtype(info.dtype());
  if (out_dtype != info.dtype()) header.set_output_dtype(out_dtype);
  header.set_op(ParseOperator(a.op));
  header.set_element_count(info.element_count());
  SetResident(header.mutable_resident(), a.r, arrays);
  const v1::ReduceResponse response = client.ReduceResident(header);
  ShardedReduceResult result;
  result.raw_value = RawValue(response, out_dtype);
  result.element_count = response.element_count();
  result.timing = FromProto(response.timing());
  return PrintReduced(a, g, result, info.dtype(), out_dtype);
}

// The value on stdout (text) or in the JSON report, and the timing.
int PrintReduced(const ReduceArgs& a, const GlobalOptions& g, ShardedReduceResult& result, v1::DType in_dtype,
                 v1::DType out_dtype) {
  const std::string& raw = result.raw_value;
  Timing& timing = result.timing;
  Report report(g.json);
  report.Field("value", JsonElement(raw, out_dtype));
  report.Field("element_count", std::to_string(result.element_count));
  report.Field("dtype", JsonQuote(DTypeName(out_dtype)));
  report.Field("op", JsonQuote(a.op));
  report.Note("reduced " + Counted(result.element_count, DTypeName(in_dtype) + " element") +
              (a.r.ref.empty() ? "" : " of resident array " + a.r.ref) + " (" + a.op + ")");
  if (!g.json) std::printf("%s\n", FormatElement(raw.data(), out_dtype).c_str());
  std::fflush(stdout);
  report.Print(&timing);
  return 0;
}

}  // namespace

Command AddReduceCommand(CLI::App& app, const GlobalOptions& g) {
  auto a = std::make_shared<ReduceArgs>();
  CLI::App* cmd = app.add_subcommand("reduce", "Reduce an array to one value (printed on stdout)");
  AddInputOptions(cmd, a->io);
  AddOperatorOption(cmd, a->op);
  cmd->add_option("--out-dtype", a->out_dtype,
                  "accumulator and value's dtype, as numpy's dtype= (int8/uint8/int16/uint16/float16 inputs; "
                  "default int64, uint64, float16)")
      ->check(CLI::IsMember(DTypeNames()));
  AddTransportOptions(cmd, a->io);
  CLI::Option* by_key = cmd->add_option("--by-key", a->by_key,
                                        "reduce each run of equal consecutive keys (integer keys, one per element: "
                                        ".npy, text, or raw); values to -o, keys to --keys-out");
  AddOutputOptions(cmd, a->io);  // -o and --keys-out: with --by-key or --keys-ref (checked at run)
  cmd->add_option("--keys-out", a->keys_out, "with --by-key (--keys-ref): write each run's key to this file");
  for (const char* other : {"--lanes", "--shards", "--shm"}) by_key->excludes(cmd->get_option(other));
  // --keep: a reduction by key's runs (--keys-ref); a reduction's value is no array to keep.
  AddResidentOptions(cmd, a->r, kKeysRef | kKeep, {"-i", "--format", "--dtype", "--lanes", "--shards", "--shm",
                                                   "--by-key"});
  cmd->get_option("--keep")->excludes(cmd->get_option("--keys-out"));
  cmd->footer(kArrayIoHelp);
  return {cmd, [a, &g] { return RunReduce(*a, g); }};
}

}  // namespace gpuscan::cli
