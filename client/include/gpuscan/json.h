// Minimal JSON helpers shared by Timing's rendering and the CLI's reports (no JSON library
// dependency for a handful of flat objects).
#pragma once

#include <string>
#include <string_view>

namespace gpuscan {

// `s` as a JSON string literal, quotes included, with control characters escaped.
std::string JsonQuote(std::string_view s);

// A finite double as a JSON number that round-trips; NaN and infinities (which JSON lacks)
// as the strings "NaN", "Infinity", "-Infinity".
std::string JsonNumber(double v);

}  // namespace gpuscan
