// gpuscan arrays: the caller's tenant's resident arrays (ListArrays), and the bytes they hold.
#include <cstdio>

#include "commands.h"
#include "resident_info.h"

namespace gpuscan::cli {
namespace {

int RunArrays(const GlobalOptions& g) {
  Client client(MakeClientOptions(g));
  const v1::ListArraysResponse list = client.ListArrays();
  if (g.json) {
    std::string arrays;
    for (const v1::ArrayInfo& a : list.arrays()) arrays += (arrays.empty() ? "" : ",") + ArrayInfoJson(a);
    std::printf("{\"arrays\":[%s],\"tenant_bytes\":%llu,\"tenant_quota_bytes\":%llu,\"budget_bytes\":%llu,"
                "\"used_bytes\":%llu}\n",
                arrays.c_str(), static_cast<unsigned long long>(list.tenant_bytes()),
                static_cast<unsigned long long>(list.tenant_quota_bytes()),
                static_cast<unsigned long long>(list.budget_bytes()), static_cast<unsigned long long>(list.used_bytes()));
    return 0;
  }
  for (const v1::ArrayInfo& a : list.arrays()) std::printf("%s\n", ArrayInfoText(a).c_str());
  std::fprintf(stderr, "%d arrays, %llu bytes (quota %s); the server holds %llu of %llu bytes\n", list.arrays_size(),
               static_cast<unsigned long long>(list.tenant_bytes()),
               list.tenant_quota_bytes() ? std::to_string(list.tenant_quota_bytes()).c_str() : "none",
               static_cast<unsigned long long>(list.used_bytes()), static_cast<unsigned long long>(list.budget_bytes()));
  return 0;
}

}  // namespace

Command AddArraysCommand(CLI::App& app, const GlobalOptions& g) {
  CLI::App* cmd = app.add_subcommand(
      "arrays", "List the tenant's resident arrays, oldest first (one a line on stdout; totals on stderr)");
  return {cmd, [&g] { return RunArrays(g); }};
}

}  // namespace gpuscan::cli
