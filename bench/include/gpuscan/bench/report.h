// Reports of kernel-suite rows: a text table, JSON and an SVG plot. Plain C++ (no CUDA), in
// gpuscan_bench_report, so a client-side tool can format rows it received over the wire.
#pragma once

#include <string>
#include <vector>

#include "gpuscan/bench/suite.h"

namespace gpuscan::bench {

// Fixed-width table: operation, algorithm, dtype, n, median us, GB/s, % of copy, x CUB,
// verified. TableHeader() + TableLine(row) for each row as it comes == ToTable(rows).
std::string TableHeader();
std::string TableLine(const Row& row);
std::string ToTable(const std::vector<Row>& rows);

// `s` as a JSON string literal, quotes included.
std::string JsonString(const std::string& s);

// {"header": header_json, "rows": [{...}, ...]}; header_json must itself be valid JSON (an
// object: device, driver, date, command line, ...).
std::string ToJson(const std::vector<Row>& rows, const std::string& header_json);

// GB/s against n (log2 axis), one line per algorithm, the copy dashed; one panel per
// operation x dtype in a grid (a row of panels per operation). A self-contained SVG document.
std::string ToSvg(const std::vector<Row>& rows, const std::string& title = "");

// "2^10,65536,1<<20,2^28" -> element counts. Throws std::invalid_argument on a bad entry.
std::vector<uint64_t> ParseSizes(const std::string& list);

// "1024" for small counts, "2^k" for powers of two from 2^10.
std::string SizeLabel(uint64_t n);

}  // namespace gpuscan::bench
