// Report printing.
#include "report.h"

#include <cstdio>

#include "gpuscan/json.h"

namespace gpuscan::cli {

void Report::Field(const std::string& key, std::string json_value) {
  fields_.emplace_back(key, std::move(json_value));
}

void Report::Note(const std::string& line) { notes_.push_back(line); }

void Report::Print(const Timing* timing) const {
  if (json_) {
    std::string out = "{";
    if (timing) out += "\"timing\":" + ToJson(*timing);
    for (const auto& [key, value] : fields_) {
      if (out.size() > 1) out += ",";
      out += JsonQuote(key) + ":" + value;
    }
    out += "}\n";
    std::fputs(out.c_str(), stdout);
    std::fflush(stdout);
    return;
  }
  for (const auto& n : notes_) std::fprintf(stderr, "%s\n", n.c_str());
  if (timing) std::fputs(ToText(*timing).c_str(), stderr);
}

}  // namespace gpuscan::cli
