// What the request fuzzer's calls share (request_fuzz_calls.cc, the RPCs'; request_fuzz_resident.cc,
// the resident arrays'): the one CPU engine, header parsing, raw elements and their comparison.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <exception>
#include <limits>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "engine/cpu_engine.h"
#include "engine/dispatch.h"
#include "reference.h"
#include "request_fuzz_calls.h"

namespace gpuscan::fuzz {

// One engine for every input: one thread (inputs are small), as the server would build it.
inline engine::CpuEngine& Engine() {
  static engine::CpuEngine* e = new engine::CpuEngine(1);  // never destroyed: no exit-order issues
  return *e;
}

// Opens the engine's session (open()) for a header validation accepted: if it throws, an
// invariant is broken (request_fuzz_target.h).
template <class Open>
auto OpenSession(const char* rpc, Open&& open) {
  try {
    return open();
  } catch (const std::exception& e) {
    Fail(std::string("a validated ") + rpc + " header made the engine throw: " + e.what());
  }
}


template <class H>
H ParseHeader(const std::string& bytes) {
  H h;
  if (!h.ParseFromString(bytes)) h.Clear();
  return h;
}

template <class H>
std::optional<uint64_t> DeclaredCount(const H& h) {
  if (h.has_element_count()) return h.element_count();
  return std::nullopt;
}

// The elements of raw bytes (whole elements only).
template <class T>
std::vector<T> Elements(const std::string& bytes) {
  std::vector<T> v(bytes.size() / sizeof(T));
  if (!v.empty()) std::memcpy(v.data(), bytes.data(), v.size() * sizeof(T));
  return v;
}


template <class T>
std::string Describe(const std::vector<T>& got, const std::vector<T>& ref, size_t i) {
  return "element " + std::to_string(i) + " of " + std::to_string(ref.size()) + ": got " +
         (i < got.size() ? testing::Show(got[i]) : std::string("nothing")) + ", expected " + testing::Show(ref[i]);
}

template <class T>
void ExpectSame(const std::vector<T>& got, const std::vector<T>& ref, const std::string& what) {
  if (got.size() != ref.size()) {
    Fail(what + ": " + std::to_string(got.size()) + " elements, expected " + std::to_string(ref.size()));
  }
  for (size_t i = 0; i < ref.size(); ++i) {
    if (!testing::SameValue(got[i], ref[i])) Fail(what + ": " + Describe(got, ref, i));
  }
}

// Float SUM and PRODUCT round, so the engine's association (its fixed blocks and lanes) and the
// sequential one may differ on arbitrary data. Reductions of those get data on which any
// association is exact: sums of multiples of 1/8 below 2^10 in magnitude, products of +-1 with
// at most 100 factors of 2 or 1/2, and some NaN and zeros, which propagate the same in any
// order. (Scans are compared exactly on raw fuzz data: against the canonical tree when the session is
// deterministic, else against the sequential fold the cpu_blocked scan computes.)
template <class T, class Op>
void TameForReduce(std::vector<T>& v, int& scaled) {
  if constexpr (std::is_floating_point_v<T> && std::is_same_v<Op, ops::Sum<T>>) {
    for (T& x : v) {
      uint64_t bits = 0;
      std::memcpy(&bits, &x, sizeof(T));
      x = bits % 61 == 0 ? std::numeric_limits<T>::quiet_NaN() : T(int64_t(bits % 2001) - 1000) / T(8);
    }
  } else if constexpr (std::is_floating_point_v<T> && std::is_same_v<Op, ops::Product<T>>) {
    for (T& x : v) {
      uint64_t bits = 0;
      std::memcpy(&bits, &x, sizeof(T));
      const T sign = (bits >> 8) & 1 ? T(-1) : T(1);
      switch (bits % 16) {
        case 0: x = sign * T(0); break;
        case 1: x = std::numeric_limits<T>::quiet_NaN(); break;
        case 2: x = sign * (scaled < 100 ? (++scaled, T(2)) : T(1)); break;
        case 3: x = sign * (scaled < 100 ? (++scaled, T(0.5)) : T(1)); break;
        default: x = sign; break;
      }
    }
  } else {
    (void)v;
    (void)scaled;
  }
}

// a < b in SortHeader's order. Integers by value. Floats in IEEE 754 totalOrder: -NaN < -inf <
// ... < -0 < +0 < ... < +inf < +NaN; NaNs of one sign by their payload bits, mirrored for the
// negative ones (totalOrder is symmetric under negation: a larger payload is further out).
template <class T>
inline bool SortBefore(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    auto rank = [](T x) { return std::isnan(x) ? (std::signbit(x) ? 0 : 2) : 1; };
    if (rank(a) != rank(b)) return rank(a) < rank(b);
    if (rank(a) == 1) {
      if (a == b) return std::signbit(a) && !std::signbit(b);  // -0 < +0
      return a < b;
    }
    using U = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
    constexpr U kPayload = (U(1) << (8 * sizeof(T) - 1)) - 1;  // every bit but the sign
    U pa, pb;
    std::memcpy(&pa, &a, sizeof(T));
    std::memcpy(&pb, &b, sizeof(T));
    return rank(a) == 2 ? (pa & kPayload) < (pb & kPayload) : (pa & kPayload) > (pb & kPayload);
  } else {
    return a < b;
  }
}

}  // namespace gpuscan::fuzz
