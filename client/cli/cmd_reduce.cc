// gpuscan reduce: reduction of an array file to one value, printed on stdout.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>

#include "array_options.h"
#include "commands.h"
#include "lanes_option.h"
#include "gpuscan/json.h"
#include "names.h"
#include "progress.h"
#include "report.h"
#include "shards_option.h"
#include "shm_option.h"
#include "text_format.h"

namespace gpuscan::cli {
namespace {

struct ReduceArgs {
  ArrayArgs io;
  std::string op = "sum";
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

int RunReduce(const ReduceArgs& a, const GlobalOptions& g) {
  auto in = ArrayInput::Open(MakeInputSpec(a.io));
  v1::ReduceHeader header;
  header.set_dtype(in->dtype());
  header.set_op(ParseOperator(a.op));
  if (in->count()) header.set_element_count(*in->count());

  Client client(MakeClientOptions(g));
  ProgressBar bar(!g.no_progress, in->payload_bytes());
  const uint32_t lanes = ChooseLanes(a.io.lanes, in->payload_bytes(), client);
  ShardedReduceResult result;
  if (a.io.shm) {
    const SharedRegion region = LoadRegion(*in, ShmDir(a.io.shm_dir, client));
    const v1::ReduceResponse response = client.ReduceShared(header, region, region.bytes());
    result.raw_value = RawValue(response, in->dtype());
    result.element_count = response.element_count();
    result.timing = FromProto(response.timing());
  } else if (a.io.shards > 1) {
    result = ShardedReduce(client, header, *in, lanes, a.io.shards);
  } else {
    const Replay replay = in->AsReplay();  // a file: retried (--retries)
    const v1::ReduceResponse response = replay ? client.ReduceStream(header, replay, bar.AsCallback(), lanes)
                                               : client.ReduceStream(header, in->AsSource(), bar.AsCallback(), lanes);
    result.raw_value = RawValue(response, in->dtype());
    result.element_count = response.element_count();
    result.timing = FromProto(response.timing());
  }
  bar.Clear();

  const std::string& raw = result.raw_value;
  Timing& timing = result.timing;
  Report report(g.json);
  report.Field("value", JsonElement(raw, in->dtype()));
  report.Field("element_count", std::to_string(result.element_count));
  report.Field("dtype", JsonQuote(DTypeName(in->dtype())));
  report.Field("op", JsonQuote(a.op));
  report.Note("reduced " + std::to_string(result.element_count) + " " +
              DTypeName(in->dtype()) + " elements (" + a.op + ")");
  if (!g.json) std::printf("%s\n", FormatElement(raw.data(), in->dtype()).c_str());
  std::fflush(stdout);
  report.Print(&timing);
  return 0;
}

}  // namespace

Command AddReduceCommand(CLI::App& app, const GlobalOptions& g) {
  auto a = std::make_shared<ReduceArgs>();
  CLI::App* cmd = app.add_subcommand("reduce", "Reduce an array to one value (printed on stdout)");
  AddInputOptions(cmd, a->io);
  cmd->add_option("--op", a->op, "operator")
      ->check(CLI::IsMember(OperatorNames()))
      ->capture_default_str();
  AddLanesOption(cmd, a->io.lanes);
  AddShardsOption(cmd, a->io.shards);
  AddShmOption(cmd, a->io.shm, a->io.shm_dir);
  cmd->footer(kArrayIoHelp);
  return {cmd, [a, &g] { return RunReduce(*a, g); }};
}

}  // namespace gpuscan::cli
