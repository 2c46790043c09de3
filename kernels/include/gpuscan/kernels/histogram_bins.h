// Histograms with numpy.histogram's bins (gpuscan::hist): which bin an element falls in, shared
// by the CPU engine and the CUDA kernel (histogram.h). Plain C++: no CUDA needed.
//
// Edges E_0 <= ... <= E_bins. x counts in the largest bin i < bins with E_i <= x (so bin i is
// [E_i, E_{i+1}) and the last bin also takes x == E_bins); x < E_0 is "below", x > E_bins
// "above", NaN "nan". Elements compare as float64 (integers convert as numpy converts them;
// float32 edges, rounded on the host, compare exactly as they would in float32).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "gpuscan/kernels/operators.h"

namespace gpuscan::hist {

// Counters past the bins: slots bins + kBelow, bins + kAbove and bins + kNan.
inline constexpr uint32_t kBelow = 0;
inline constexpr uint32_t kAbove = 1;
inline constexpr uint32_t kNan = 2;
inline constexpr uint32_t kExtraSlots = 3;

// numpy.linspace(lo, hi, bins + 1) in float64: E_i = i * ((hi - lo) / bins) + lo, two roundings
// (product, then sum; separate statements so no FMA forms), E_bins = hi; then each edge rounded
// to float32 when the array is float32 (numpy computes a float32 array's edges in float32).
// The caller checks lo < hi, both finite and hi - lo finite.
inline std::vector<double> EvenEdges(double lo, double hi, uint32_t bins, bool float32) {
  std::vector<double> e(static_cast<std::size_t>(bins) + 1);
  const double delta = hi - lo;
  const double step = delta / bins;
  for (uint32_t i = 0; i < bins; ++i) {
    double y = static_cast<double>(i);
    if (step == 0) {  // numpy's branch for a step that underflows
      y = y / bins;
      y = y * delta;
    } else {
      y = y * step;
    }
    y = y + lo;
    e[i] = y;
  }
  e[bins] = hi;
  if (float32) {
    for (double& v : e) v = static_cast<double>(static_cast<float>(v));
  }
  return e;
}

// What SlotOf needs; plain data, copied to the device by value (edges point to device memory
// there).
struct Bins {
  const double* edges = nullptr;  // bins + 1
  uint32_t bins = 0;
  bool even = false;  // edges from EvenEdges: a first guess by arithmetic, then corrected
  double lo = 0;      // even: E_0
  double scale = 0;   // even: bins / (E_bins - E_0)
  bool float_edges = false;  // every edge is a float32 value (SlotOf may compare float elements in float)
  // even: how far (in bins) the guess may stray from an element's true place among the edges,
  // computing in float (margin_f) or double (margin_d); a guess farther than that from both of
  // its bin's edges is the bin. Negative: never trust the guess.
  double margin_f = -1;
  double margin_d = -1;
};

// The margin for arithmetic with unit roundoff eps: the guess (v - E_0) * scale takes three
// roundings of at most eps * g each (g <= bins), and the edges stray from the evenly spaced
// E_0 + i * (E_bins - E_0) / bins by EvenEdges' roundings (a few ulps of float64 at the range's
// magnitude, plus the float32 rounding when the edges are float32 values). Twice the sum, so
// that an element the guess places within it of an edge is always settled by the edges.
inline double GuessMargin(const Bins& b, double eps) {
  if (!b.even) return -1;
  const double big = std::fmax(std::fabs(b.edges[0]), std::fabs(b.edges[b.bins]));
  double edge_err = 8 * (std::nextafter(big, INFINITY) - big);
  if (b.float_edges) {
    const float bf = static_cast<float>(big);
    edge_err += static_cast<double>(std::nextafter(bf, INFINITY)) - static_cast<double>(bf);
  }
  const double m = 2 * (4 * eps * b.bins + edge_err * b.scale);
  return std::isfinite(m) && m < 0.25 ? m : -1;
}

inline Bins MakeBins(const double* edges, uint32_t bins, bool even) {
  Bins b;
  b.edges = edges;
  b.bins = bins;
  b.even = even && edges[bins] > edges[0];
  b.lo = edges[0];
  b.scale = b.even ? bins / (edges[bins] - edges[0]) : 0;
  b.float_edges = true;
  for (uint32_t i = 0; i <= bins && b.float_edges; ++i) {
    b.float_edges = static_cast<double>(static_cast<float>(edges[i])) == edges[i];
  }
  b.margin_d = GuessMargin(b, 0x1p-53);
  b.margin_f = b.float_edges ? GuessMargin(b, 0x1p-24) : -1;
  return b;
}

// The slot of x: a bin 0..bins-1, or bins + kBelow / kAbove / kNan, against `e` (bins + 1 edges
// held as E). E = double always works; E = float gives the same slots, faster on a GPU, when x
// is float and every edge is a float32 value (even edges of a float32 array): both sides of each
// comparison are then exact in float.
// first and last: e[0] and e[bins], which a caller counting many elements may hold in registers.
template <class T, class E>
GPUSCAN_HD uint32_t SlotOf(T x, const Bins& b, const E* e, E first, E last) {
  if (ops::IsNan(x)) return b.bins + kNan;
  const E v = static_cast<E>(x);
  if (v < first) return b.bins + kBelow;
  if (v > last) return b.bins + kAbove;
  uint32_t i = 0;
  if (b.even) {
    // The guess is only a start: the loops settle on the edges themselves, so its rounding
    // never decides a bin (a step or two at most).
    const E g = (v - static_cast<E>(b.lo)) * static_cast<E>(b.scale);
    i = g >= static_cast<E>(b.bins) ? b.bins - 1 : (g > 0 ? static_cast<uint32_t>(g) : 0);
    const E margin = static_cast<E>(sizeof(E) == sizeof(float) ? b.margin_f : b.margin_d);
    if (margin >= 0 && g > 0) {  // far from both edges of the guessed bin: no edge need be read
      const E f = g - static_cast<E>(i);
      if (f > margin && f < 1 - margin) return i;
    }
    while (i > 0 && v < e[i]) --i;
    while (i + 1 < b.bins && v >= e[i + 1]) ++i;
  } else {
    // Largest i in [0, bins) with e[i] <= v; e[0] <= v holds.
    uint32_t lo = 0, hi = b.bins;
    while (hi - lo > 1) {
      const uint32_t mid = lo + (hi - lo) / 2;
      if (e[mid] <= v) {
        lo = mid;
      } else {
        hi = mid;
      }
    }
    i = lo;
  }
  return i;
}

template <class T, class E>
GPUSCAN_HD uint32_t SlotOf(T x, const Bins& b, const E* e) {
  return SlotOf(x, b, e, e[0], e[b.bins]);
}

template <class T>
GPUSCAN_HD uint32_t SlotOf(T x, const Bins& b) {
  return SlotOf(x, b, b.edges);
}

}  // namespace gpuscan::hist
