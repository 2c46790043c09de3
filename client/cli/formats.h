// Array file formats the CLI reads and writes, and how a path picks one.
#pragma once

#include <stdexcept>
#include <string>

namespace gpuscan::cli {

enum class Format { kAuto, kNpy, kRaw, kText };

inline Format ParseFormat(const std::string& name) {
  if (name == "auto") return Format::kAuto;
  if (name == "npy") return Format::kNpy;
  if (name == "raw" || name == "bin") return Format::kRaw;
  if (name == "text" || name == "txt" || name == "csv") return Format::kText;
  throw std::invalid_argument("unknown format '" + name + "' (choose from npy, raw, text)");
}

// .npy -> npy; .bin, .raw -> raw; .txt, .csv -> text; anything else (and "-") -> kAuto.
inline Format FormatFromPath(const std::string& path) {
  auto ends = [&](const char* ext) {
    std::string e(ext);
    return path.size() > e.size() && path.compare(path.size() - e.size(), e.size(), e) == 0;
  };
  if (ends(".npy")) return Format::kNpy;
  if (ends(".bin") || ends(".raw")) return Format::kRaw;
  if (ends(".txt") || ends(".csv")) return Format::kText;
  return Format::kAuto;
}

}  // namespace gpuscan::cli
