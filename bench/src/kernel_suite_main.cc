// kernel_suite: runs the kernel benchmark suite (suite.h) on one device and prints a table as
// rows are measured; optionally writes JSON (header + rows) and an SVG plot.
//
//   kernel_suite                                  # everything: 3 ops x 4 dtypes x 2^10..2^30
//   kernel_suite --ops scan --dtypes int32,float32 --sizes 2^16,2^28 --json r.json --svg r.svg
#include <CLI/CLI.hpp>

#include <cstdio>
#include <ctime>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "gpuscan/bench/report.h"
#include "gpuscan/bench/suite.h"

namespace {

using namespace gpuscan;

std::vector<std::string> SplitList(const std::string& s) {
  std::vector<std::string> out;
  std::string item;
  for (char c : s + ",") {
    if (c == ',') {
      if (!item.empty()) out.push_back(item);
      item.clear();
    } else if (c != ' ') {
      item += c;
    }
  }
  return out;
}

types::DType ParseDType(const std::string& name) {
  for (types::DType t : types::kAllDTypes) {
    if (types::Name(t) == name) return t;
  }
  throw std::invalid_argument("unknown dtype '" + name + "' (int32, int64, uint32, uint64, float32, float64)");
}

std::string VersionString(int v) { return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10); }

bool WriteFile(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  f << text;
  return bool(f);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"gpuscan kernel suite: scan / reduce / compact against CUB and a device copy"};
  std::string ops, algorithms, dtypes, sizes, json_path, svg_path, commit;
  bench::SuiteSpec spec;
  uint64_t chained_max = spec.chained_max_elements;
  app.add_option("--ops", ops, "scan,reduce,compact,histogram (default: all four), segmented_scan, reduce_by_key, sort, scan2d, scan_axis, scan_widen, pcie");
  app.add_option("--algorithms", algorithms,
                 "e.g. decoupled_lookback,chained,...,one_pass,single_pass (default: all; CUB always runs)");
  app.add_option("--dtypes", dtypes, "int32,float32,int64,float64 (default), also uint32,uint64");
  app.add_option("--sizes", sizes, "element counts: 2^10,65536,1<<20 (default: 2^10,2^12,...,2^30)");
  app.add_option("--reps", spec.repetitions, "timed runs per row (median reported)")->capture_default_str();
  app.add_option("--warmup", spec.warmup, "untimed runs before them")->capture_default_str();
  app.add_option("--device", spec.device, "CUDA device index")->capture_default_str();
  app.add_option("--chained-max", chained_max, "skip chained above this n (0: never skip)")->capture_default_str();
  app.add_option("--json", json_path, "write rows + header as JSON here");
  app.add_option("--svg", svg_path, "write a plot of GB/s vs size here");
  app.add_option("--commit", commit, "source revision to record in the JSON header");
  CLI11_PARSE(app, argc, argv);

  try {
    spec.operations = SplitList(ops);
    spec.algorithms = SplitList(algorithms);
    for (const std::string& d : SplitList(dtypes)) spec.dtypes.push_back(ParseDType(d));
    if (!sizes.empty()) spec.sizes = bench::ParseSizes(sizes);
    spec.chained_max_elements = chained_max;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kernel_suite: %s\n", e.what());
    return 2;
  }

  std::string command;
  for (int i = 0; i < argc; ++i) command += (i ? " " : "") + std::string(argv[i]);
  std::vector<std::string> notes;
  spec.on_note = [&](const std::string& line) {
    notes.push_back(line);
    std::printf("# note: %s\n", line.c_str());
    std::fflush(stdout);
  };

  std::vector<bench::Row> rows;
  try {
    const bench::DeviceInfo info = bench::QueryDevice(spec.device);
    char date[64];
    const std::time_t now = std::time(nullptr);
    std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
    std::printf("# device: %s (sm_%d%d, %d SMs, L2 %llu MB, %llu MiB), driver %s, runtime %s, %s\n",
                info.name.c_str(), info.compute_major, info.compute_minor, info.sm_count,
                (unsigned long long)(info.l2_bytes >> 20), (unsigned long long)(info.memory_bytes >> 20),
                VersionString(info.driver_version).c_str(), VersionString(info.runtime_version).c_str(), date);
    std::printf("# median of %d after %d warm-up; GB/s of the bytes that must move; %%copy = copy time / time "
                "(copy of the same bytes); xCUB = CUB time / time (>1: faster)\n",
                spec.repetitions, spec.warmup);
    std::fputs(bench::TableHeader().c_str(), stdout);
    std::fflush(stdout);
    bench::RunKernelSuite(spec, [&](const bench::Row& r) {
      rows.push_back(r);
      std::fputs(bench::TableLine(r).c_str(), stdout);
      std::fflush(stdout);
      return true;
    });

    std::string header = "{\"device\": " + bench::JsonString(info.name) +
                         ", \"compute_capability\": \"" + std::to_string(info.compute_major) + "." +
                         std::to_string(info.compute_minor) + "\", \"sm_count\": " + std::to_string(info.sm_count) +
                         ", \"l2_bytes\": " + std::to_string(info.l2_bytes) +
                         ", \"memory_bytes\": " + std::to_string(info.memory_bytes) +
                         ", \"driver_version\": " + bench::JsonString(VersionString(info.driver_version)) +
                         ", \"runtime_version\": " + bench::JsonString(VersionString(info.runtime_version)) +
                         ", \"date\": " + bench::JsonString(date) + ", \"command\": " + bench::JsonString(command) +
                         ", \"commit\": " + bench::JsonString(commit) +
                         ", \"repetitions\": " + std::to_string(spec.repetitions) +
                         ", \"warmup\": " + std::to_string(spec.warmup) + ", \"notes\": [";
    for (std::size_t i = 0; i < notes.size(); ++i) header += (i ? ", " : "") + bench::JsonString(notes[i]);
    header += "]}";
    if (!json_path.empty() && !WriteFile(json_path, bench::ToJson(rows, header))) {
      std::fprintf(stderr, "kernel_suite: cannot write %s\n", json_path.c_str());
      return 1;
    }
    if (!svg_path.empty() &&
        !WriteFile(svg_path, bench::ToSvg(rows, "gpuscan kernel suite on " + info.name + " (" + date + ")"))) {
      std::fprintf(stderr, "kernel_suite: cannot write %s\n", svg_path.c_str());
      return 1;
    }
  } catch (const types::Error& e) {
    std::fprintf(stderr, "kernel_suite: %s\n", e.what());
    return e.code() == types::ErrorCode::kInvalidArgument ? 2 : 1;
  }
  int unverified = 0;
  for (const bench::Row& r : rows) unverified += r.operation != "copy" && !r.verified;
  if (unverified) std::printf("# %d row(s) NOT verified\n", unverified);
  return unverified ? 3 : 0;
}
