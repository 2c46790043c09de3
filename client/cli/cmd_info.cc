// gpuscan info and gpuscan health: what the server runs on, and whether it serves.
#include <google/protobuf/util/json_util.h>

#include <cstdio>
#include <memory>

#include "commands.h"
#include "gpuscan/json.h"
#include "names.h"

namespace gpuscan::cli {
namespace {

template <class List, class NameFn>
std::string JoinNames(const List& list, NameFn name) {
  std::string s;
  for (const auto& v : list) s += (s.empty() ? "" : ", ") + name(v);
  return s.empty() ? "(none)" : s;
}

std::string Bytes(uint64_t b) {
  char buf[32];
  if (b >= (1ull << 30)) {
    std::snprintf(buf, sizeof buf, "%.1f GiB", b / double(1ull << 30));
  } else if (b >= (1ull << 20)) {
    std::snprintf(buf, sizeof buf, "%.1f MiB", b / double(1ull << 20));
  } else {
    std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(b));
  }
  return buf;
}

void PrintInfoText(const v1::ServerInfo& info, const std::string& target) {
  std::printf("server             %s\n", target.c_str());
  std::printf("version            %s\n", info.version().c_str());
  std::printf("engine             %s", info.engine().c_str());
  if (info.cpu_threads() > 0) std::printf(" (%u cpu threads)", info.cpu_threads());
  std::printf("\n");
  if (info.devices().empty()) std::printf("devices            (none)\n");
  for (const auto& d : info.devices()) {
    std::printf("device             %s, sm_%d%d, %s, %d SMs\n", d.name().c_str(),
                d.compute_capability_major(), d.compute_capability_minor(),
                Bytes(d.memory_bytes()).c_str(), d.multiprocessors());
  }
  auto algo = [](int a) { return AlgorithmName(static_cast<v1::ScanAlgorithm>(a)); };
  auto str = [](const std::string& s) { return s; };
  std::printf("scan algorithms    %s\n", JoinNames(info.scan_algorithms(), algo).c_str());
  std::printf("float scan default %s (float SUM/PRODUCT scans and reduces)\n",
              algo(info.float_scan_default()).c_str());
  std::printf("reduce algorithms  %s\n", JoinNames(info.reduce_algorithms(), str).c_str());
  std::printf("compact algorithms %s\n", JoinNames(info.compact_algorithms(), str).c_str());
  auto dtype = [](int t) { return DTypeName(static_cast<v1::DType>(t)); };
  auto op = [](int o) { return OperatorName(static_cast<v1::Operator>(o)); };
  std::printf("dtypes             %s\n", JoinNames(info.dtypes(), dtype).c_str());
  std::printf("operators          %s\n", JoinNames(info.operators(), op).c_str());
  if (!info.operations().empty()) std::printf("operations         %s\n", JoinNames(info.operations(), str).c_str());
  if (!info.narrow_dtypes().empty()) {
    std::printf("narrow dtypes      %s (in %s)\n", JoinNames(info.narrow_dtypes(), dtype).c_str(),
                info.narrow_operations().empty() ? "scan, reduce"
                                                 : JoinNames(info.narrow_operations(), str).c_str());
  }
  const v1::Limits& l = info.limits();
  std::printf("max chunk          %s per message\n", Bytes(l.max_chunk_bytes()).c_str());
  std::printf("max request        %s\n",
              l.max_request_bytes() ? Bytes(l.max_request_bytes()).c_str() : "unlimited");
  std::printf("max message        %s\n", Bytes(l.max_receive_message_bytes()).c_str());
  std::printf("concurrency        %u calls at once, %u queued\n", l.max_concurrent_requests(),
              l.max_queued_requests());
  if (l.max_histogram_bins()) std::printf("histogram bins     at most %u\n", l.max_histogram_bins());
  if (l.max_sort_bytes()) std::printf("sort input         at most %s\n", Bytes(l.max_sort_bytes()).c_str());
  if (l.max_scan2d_row_bytes()) {
    std::printf("scan2d row         at most %s\n", Bytes(l.max_scan2d_row_bytes()).c_str());
  }
}

int RunInfo(const GlobalOptions& g) {
  Client client(MakeClientOptions(g));
  v1::ServerInfo info = client.Info();
  if (!g.json) {
    PrintInfoText(info, g.server);
    return 0;
  }
  google::protobuf::util::JsonPrintOptions opts;
  opts.always_print_primitive_fields = true;
  opts.preserve_proto_field_names = true;
  std::string json;
  auto st = google::protobuf::util::MessageToJsonString(info, &json, opts);
  if (!st.ok()) throw std::runtime_error("cannot render ServerInfo as JSON");
  std::printf("%s\n", json.c_str());
  return 0;
}

int RunHealth(const GlobalOptions& g, const std::string& service) {
  Client client(MakeClientOptions(g));
  std::string status;
  try {
    status = client.Health(service);
  } catch (const RpcError& e) {  // not answering is not SERVING: 2, as the help says
    std::fflush(stdout);
    std::fprintf(stderr, "error: %s\n", e.what());
    return kExitNotServing;
  }
  if (g.json) {
    std::printf("{\"status\":%s}\n", JsonQuote(status).c_str());
  } else {
    std::printf("%s\n", status.c_str());
  }
  return status == "SERVING" ? 0 : kExitNotServing;
}

}  // namespace

Command AddInfoCommand(CLI::App& app, const GlobalOptions& g) {
  CLI::App* cmd = app.add_subcommand(
      "info", "Show the server's engine, devices, algorithms, dtypes and limits");
  return {cmd, [&g] { return RunInfo(g); }};
}

Command AddHealthCommand(CLI::App& app, const GlobalOptions& g) {
  auto service = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand(
      "health", "Print the grpc.health.v1 status; exit 0 only when SERVING (2 otherwise, unreachable too)");
  cmd->add_option("--service", *service, "service name to check (default: the whole server)");
  return {cmd, [&g, service] { return RunHealth(g, *service); }};
}

}  // namespace gpuscan::cli
