// The histogram vocabulary the service needs, in the engine's words: where a session's Result()
// keeps the counters past the bins, and the even edges the engines bin against. The kernels'
// gpuscan/kernels/histogram_bins.h holds the one definition of both; the service reaches it
// only through here.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/types.h"
#include "gpuscan/kernels/histogram_bins.h"

namespace gpuscan::engine {

// HistogramSession::Result() holds bins + kHistogramExtraSlots counters: the bins, then these.
inline constexpr uint32_t kHistogramBelow = hist::kBelow;
inline constexpr uint32_t kHistogramAbove = hist::kAbove;
inline constexpr uint32_t kHistogramNan = hist::kNan;
inline constexpr uint32_t kHistogramExtraSlots = hist::kExtraSlots;

// numpy.histogram's even edges for bins over [lo, hi], rounded for the dtype (HistogramSpec::even).
// The caller checks lo < hi, both finite and hi - lo finite.
inline std::vector<double> EvenHistogramEdges(double lo, double hi, uint32_t bins, DType dtype) {
  return hist::EvenEdges(lo, hi, bins, dtype == DType::kFloat32);
}

}  // namespace gpuscan::engine
