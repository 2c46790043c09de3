// A reader for the Prometheus text exposition format (version 0.0.4), enough to check what a
// gpuscan server exports: every sample line becomes {name, labels, value}; comments (# HELP,
// # TYPE) are skipped. Label values are unescaped (\\, \", \n).
#pragma once

#include <cstdlib>
#include <map>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace gpuscan::testing {

using PromLabels = std::map<std::string, std::string>;

struct PromSample {
  std::string name;
  PromLabels labels;
  double value = 0;
};

class PromText {
 public:
  // Throws std::runtime_error on a line it cannot read (so a malformed exposition fails tests).
  explicit PromText(const std::string& text) {
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line)) {
      if (line.empty() || line[0] == '#') continue;
      samples_.push_back(ParseLine(line));
    }
  }

  const std::vector<PromSample>& samples() const { return samples_; }

  // The sample with exactly these labels, if any.
  std::optional<double> Find(const std::string& name, const PromLabels& labels = {}) const {
    for (const PromSample& s : samples_) {
      if (s.name == name && s.labels == labels) return s.value;
    }
    return std::nullopt;
  }
  // The sum over every sample of `name` whose labels include `subset` (0 when none does).
  double Sum(const std::string& name, const PromLabels& subset = {}) const {
    double sum = 0;
    for (const PromSample& s : samples_) {
      if (s.name == name && Includes(s.labels, subset)) sum += s.value;
    }
    return sum;
  }
  // Every sample of `name` whose labels include `subset`.
  std::vector<PromSample> All(const std::string& name, const PromLabels& subset = {}) const {
    std::vector<PromSample> out;
    for (const PromSample& s : samples_) {
      if (s.name == name && Includes(s.labels, subset)) out.push_back(s);
    }
    return out;
  }
  bool Has(const std::string& name) const { return !All(name).empty(); }

 private:
  static bool Includes(const PromLabels& labels, const PromLabels& subset) {
    for (const auto& [k, v] : subset) {
      auto it = labels.find(k);
      if (it == labels.end() || it->second != v) return false;
    }
    return true;
  }

  static PromSample ParseLine(const std::string& line) {
    const auto fail = [&](const char* why) { throw std::runtime_error(std::string(why) + ": " + line); };
    PromSample s;
    size_t i = line.find_first_of("{ ");
    if (i == std::string::npos || i == 0) fail("no metric name");
    s.name = line.substr(0, i);
    if (line[i] == '{') {
      ++i;
      while (i < line.size() && line[i] != '}') {
        const size_t eq = line.find('=', i);
        if (eq == std::string::npos || eq + 1 >= line.size() || line[eq + 1] != '"') fail("bad label");
        std::string key = line.substr(i, eq - i);
        std::string value;
        size_t j = eq + 2;
        for (; j < line.size() && line[j] != '"'; ++j) {
          if (line[j] == '\\' && j + 1 < line.size()) {
            ++j;
            value += line[j] == 'n' ? '\n' : line[j];
          } else {
            value += line[j];
          }
        }
        if (j >= line.size()) fail("unterminated label value");
        s.labels.emplace(std::move(key), std::move(value));
        i = j + 1;
        if (i < line.size() && line[i] == ',') ++i;
      }
      if (i >= line.size()) fail("unterminated label set");
      ++i;  // '}'
    }
    while (i < line.size() && line[i] == ' ') ++i;
    const std::string number = line.substr(i, line.find(' ', i) - i);  // a timestamp may follow
    char* end = nullptr;
    s.value = std::strtod(number.c_str(), &end);  // also reads +Inf, -Inf and NaN
    if (number.empty() || *end != '\0') fail("bad value");
    return s;
  }

  std::vector<PromSample> samples_;
};

}  // namespace gpuscan::testing
