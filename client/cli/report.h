// Report: how a command tells what happened. Text mode: the Timing breakdown (and notes) on
// stderr, so stdout holds only results. --json mode: one JSON object on stdout,
// {"timing":{...}, <fields>}.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "gpuscan/timing.h"

namespace gpuscan::cli {

// "1 int32 element", "3 int32 elements": a count with its noun (one_noun, or it plus "s").
inline std::string Counted(uint64_t n, const std::string& one_noun) {
  return std::to_string(n) + " " + one_noun + (n == 1 ? "" : "s");
}

class Report {
 public:
  explicit Report(bool json) : json_(json) {}
  bool json() const { return json_; }
  // A field of the JSON object; `json_value` is already JSON (a number, quoted string, ...).
  void Field(const std::string& key, std::string json_value);
  // A line for stderr in text mode (ignored in JSON mode).
  void Note(const std::string& line);
  // Prints everything: the JSON object, or the notes and the timing breakdown.
  void Print(const Timing* timing) const;

 private:
  bool json_;
  std::vector<std::pair<std::string, std::string>> fields_;
  std::vector<std::string> notes_;
};

}  // namespace gpuscan::cli
