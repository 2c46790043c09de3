#include "engine/types.h"

#include <cmath>

namespace gpuscan::engine {

void CheckHistogramSpec(const HistogramSpec& spec) {
  const std::vector<double>& e = spec.edges;
  if (e.size() < 2 || e.size() > uint64_t{kMaxHistogramBins} + 1) {
    throw Error(ErrorCode::kInvalidArgument, "a histogram needs 2 to " + std::to_string(kMaxHistogramBins + 1) +
                                                 " edges, not " + std::to_string(e.size()));
  }
  for (size_t i = 0; i < e.size(); ++i) {
    if (std::isnan(e[i]) || (i > 0 && e[i] < e[i - 1])) {
      throw Error(ErrorCode::kInvalidArgument, "histogram edge " + std::to_string(i) + " is NaN or below the one before");
    }
  }
}

}  // namespace gpuscan::engine
