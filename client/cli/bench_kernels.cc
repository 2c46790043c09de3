// gpuscan bench --kernels: the Benchmark RPC. Prints the table as rows arrive, then writes JSON
// and the SVG plot, with gpuscan_bench_report (the same writers as the kernel_suite command).
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <stdexcept>

#include "bench.h"
#include "gpuscan/json.h"
#include "names.h"

#include "gpuscan/bench/report.h"

namespace gpuscan::cli {
namespace {

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  if (!f || !f.write(text.data(), static_cast<std::streamsize>(text.size()))) {
    throw std::runtime_error("cannot write " + path);
  }
}

std::string NowIso() {
  std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

bench::Row FromWire(const v1::BenchmarkRow& w) {
  bench::Row r;
  r.operation = w.operation();
  r.algorithm = w.algorithm();
  r.dtype = static_cast<types::DType>(static_cast<int>(w.dtype()) - v1::DTYPE_INT32);
  r.elements = w.elements();
  r.median_us = w.median_us();
  r.min_us = w.min_us();
  r.max_us = w.max_us();
  r.bytes_moved = w.bytes_moved();
  r.gbps = w.gbps();
  r.pct_of_copy = w.pct_of_copy();
  r.ratio_to_cub = w.ratio_to_cub();
  r.verified = w.verified();
  r.device = w.device();
  return r;
}

}  // namespace

std::vector<uint64_t> ParseSizeList(const std::string& list) { return bench::ParseSizes(list); }

int RunKernelBench(const KernelBenchArgs& a, const GlobalOptions& g) {
  v1::BenchmarkRequest req;
  for (const auto& o : a.ops) req.add_operations(o);
  for (const auto& al : a.algorithms) req.add_algorithms(al);
  for (const auto& d : a.dtypes) req.add_dtypes(ParseDType(d));
  if (!a.sizes.empty()) {
    for (uint64_t n : ParseSizeList(a.sizes)) req.add_sizes(n);
  }
  req.set_repetitions(a.reps);
  req.set_warmup(a.warmup);
  for (int d : a.devices) req.add_devices(d);

  Client client(MakeClientOptions(g));
  const v1::ServerInfo info = client.Info();
  std::string device = info.devices().empty() ? info.engine() : info.devices(0).name();
  std::fprintf(stderr, "kernel suite on %s (%s engine) at %s\n", device.c_str(), info.engine().c_str(),
               g.server.c_str());

  std::vector<bench::Row> rows;
  client.Benchmark(req, [&](const v1::BenchmarkRow& w) {
    if (rows.empty()) std::fputs(bench::TableHeader().c_str(), stdout);
    rows.push_back(FromWire(w));
    std::fputs(bench::TableLine(rows.back()).c_str(), stdout);
    std::fflush(stdout);
  });
  const std::string header = "{\"device\":" + bench::JsonString(device) + ",\"server\":" +
                             bench::JsonString(g.server) + ",\"server_version\":" +
                             bench::JsonString(info.version()) + ",\"date\":" + bench::JsonString(NowIso()) +
                             ",\"source\":\"gpuscan bench --kernels\"}";
  if (!a.json_path.empty()) WriteFile(a.json_path, bench::ToJson(rows, header));
  if (!a.svg_path.empty()) WriteFile(a.svg_path, bench::ToSvg(rows, "gpuscan kernel suite on " + device));
  std::fprintf(stderr, "%zu rows\n", rows.size());
  return 0;
}

}  // namespace gpuscan::cli
