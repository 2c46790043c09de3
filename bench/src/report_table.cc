// The suite's rows as a fixed-width text table.
#include <cstdio>
#include <string>
#include <vector>

#include "gpuscan/bench/report.h"

namespace gpuscan::bench {

std::string TableHeader() {
  char line[256];
  std::snprintf(line, sizeof line, "%-8s %-19s %-8s %6s %11s %9s %7s %7s %s\n", "op", "algorithm",
                "dtype", "n", "median_us", "GB/s", "%copy", "xCUB", "verified");
  return line;
}

std::string TableLine(const Row& r) {
  char ratio[32] = "-";
  if (r.ratio_to_cub > 0) std::snprintf(ratio, sizeof ratio, "%.3f", r.ratio_to_cub);
  const std::string dtype(types::Name(r.dtype));
  char line[256];
  std::snprintf(line, sizeof line, "%-8s %-19s %-8s %6s %11.2f %9.1f %6.1f%% %7s %s\n",
                r.operation.c_str(), r.algorithm.c_str(), dtype.c_str(),
                SizeLabel(r.elements).c_str(), r.median_us, r.gbps, r.pct_of_copy, ratio,
                r.operation == "copy" ? "-" : (r.verified ? "yes" : "NO"));
  return line;
}

std::string ToTable(const std::vector<Row>& rows) {
  std::string out = TableHeader();
  for (const Row& r : rows) out += TableLine(r);
  return out;
}

}  // namespace gpuscan::bench
