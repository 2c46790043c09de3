// Size lists: the suite's defaults, parsing "2^10,65536,1<<20" and short labels.
#include <stdexcept>
#include <string>
#include <vector>

#include "gpuscan/bench/report.h"
#include "gpuscan/bench/suite.h"

namespace gpuscan::bench {

std::vector<uint64_t> DefaultSizes() {
  std::vector<uint64_t> sizes;  // 2^10, 2^12, ..., 2^30: 2^28 is one of them
  for (int k = 10; k <= 30; k += 2) sizes.push_back(uint64_t(1) << k);
  return sizes;
}

namespace {

uint64_t ParseOne(const std::string& item) {
  auto number = [&](const std::string& s) -> uint64_t {
    if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos) {
      throw std::invalid_argument("bad size '" + item + "' (want 1024, 2^10 or 1<<10)");
    }
    return std::stoull(s);
  };
  std::size_t at = item.find('^');
  std::size_t skip = 1;
  if (at == std::string::npos) {
    at = item.find("<<");
    skip = 2;
  }
  if (at == std::string::npos) return number(item);
  const uint64_t base = number(item.substr(0, at));
  const uint64_t exp = number(item.substr(at + skip));
  if (skip == 1 && base != 2) throw std::invalid_argument("bad size '" + item + "' (only 2^k)");
  if (exp > 40) throw std::invalid_argument("size '" + item + "' too large");
  return skip == 1 ? uint64_t(1) << exp : base << exp;
}

}  // namespace

std::vector<uint64_t> ParseSizes(const std::string& list) {
  std::vector<uint64_t> sizes;
  std::size_t start = 0;
  while (start <= list.size()) {
    std::size_t end = list.find(',', start);
    if (end == std::string::npos) end = list.size();
    std::string item;
    for (char c : list.substr(start, end - start)) {
      if (c != ' ') item += c;
    }
    if (!item.empty()) sizes.push_back(ParseOne(item));
    start = end + 1;
  }
  if (sizes.empty()) throw std::invalid_argument("empty size list");
  return sizes;
}

std::string SizeLabel(uint64_t n) {
  if (n >= 1024 && (n & (n - 1)) == 0) {
    int k = 0;
    while ((uint64_t(1) << k) != n) ++k;
    return "2^" + std::to_string(k);
  }
  return std::to_string(n);
}

}  // namespace gpuscan::bench
