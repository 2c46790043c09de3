// What every test suite (unit, integration, gpu) checks results against: plain sequential
// loops over the shared operator functors, random inputs whose results mean something, and
// comparisons that are exact where the arithmetic is exact and bounded where floats round.
//
// Random inputs come from a std::mt19937_64 seeded by std::random_device; GPUSCAN_SEEDED_RNG
// puts the seed in every failure message, and GPUSCAN_TEST_SEED=<seed> replays it.
//
// Note: this namespace is gpuscan::testing, so inside namespace gpuscan write ::testing:: for
// GoogleTest's.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iomanip>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "gpuscan/kernels/operators.h"

namespace gpuscan::testing {

// ---------------------------------------------------------------------------------------------
// Sequential references

// Inclusive: out[i] = x[0] op ... op x[i]. Exclusive: out[0] = identity, out[i] = x[0] op ...
// op x[i-1]. The accumulator is always the left operand, as in every engine.
template <class T, class Op>
std::vector<T> ScanRef(const std::vector<T>& in, bool exclusive) {
  const Op op;
  std::vector<T> out(in.size());
  T acc = Op::identity();
  for (std::size_t i = 0; i < in.size(); ++i) {
    if (exclusive) {
      out[i] = acc;
      acc = op(acc, in[i]);
    } else {
      acc = op(acc, in[i]);
      out[i] = acc;
    }
  }
  return out;
}

// The 2-D inclusive scan of a rows x cols row-major matrix, as gpuscan.v1.Scan2DHeader defines
// it: each row folded left to right from its first element, then each column top to bottom
// from the first row (no identity folded in anywhere, so a leading -0.0 stays -0.0).
template <class T, class Op>
std::vector<T> Scan2DRef(const std::vector<T>& in, std::size_t rows, std::size_t cols) {
  const Op op;
  std::vector<T> out(in.size());
  for (std::size_t i = 0; i < rows; ++i) {
    T acc = in[i * cols];
    for (std::size_t j = 0; j < cols; ++j) {
      if (j) acc = op(acc, in[i * cols + j]);
      out[i * cols + j] = i ? op(out[(i - 1) * cols + j], acc) : acc;
    }
  }
  return out;
}

// Axis scans (numpy's cumsum(m, axis=1) with along_rows, axis=0 without; issue 47): each row or
// column folded in order from its first element; exclusive: the identity first, then the fold of
// the elements before it.
template <class T, class Op>
std::vector<T> ScanAxisRef(const std::vector<T>& in, std::size_t rows, std::size_t cols, bool along_rows,
                           bool exclusive) {
  const Op op;
  std::vector<T> out(in.size());
  const std::size_t lines = along_rows ? rows : cols, length = along_rows ? cols : rows;
  for (std::size_t l = 0; l < lines; ++l) {
    auto at = [&](std::size_t k) { return along_rows ? l * cols + k : k * cols + l; };
    T acc{};
    for (std::size_t k = 0; k < length; ++k) {
      const T before = acc;
      acc = k ? op(acc, in[at(k)]) : in[at(k)];
      out[at(k)] = !exclusive ? acc : k ? before : Op::identity();
    }
  }
  return out;
}

template <class T, class Op>
T ReduceRef(const std::vector<T>& in) {
  const Op op;
  T acc = Op::identity();
  for (const T& x : in) acc = op(acc, x);
  return acc;
}

template <class T>
struct CompactResult {
  std::vector<T> values;
  std::vector<int64_t> indices;  // positions in the whole array
};

// Keeps values[i] where flags[i] != 0; indices start at first_index.
template <class T>
CompactResult<T> CompactRef(const std::vector<T>& values, const std::vector<uint8_t>& flags,
                            int64_t first_index = 0) {
  CompactResult<T> r;
  for (std::size_t i = 0; i < values.size() && i < flags.size(); ++i) {
    if (flags[i] == 0) continue;
    r.values.push_back(values[i]);
    r.indices.push_back(first_index + static_cast<int64_t>(i));
  }
  return r;
}

// A predicate's meaning. P is any enum with the enumerators kNonzero, kEq, kNe, kLt, kLe, kGt,
// kGe, kInRange, kNotNan (engine::PredicateOp, or a kernel library's own mirror of it).
// Comparisons are IEEE: false with a NaN operand, except NE, which is true.
template <class P, class T>
bool PredicateRef(P op, T x, T threshold, T upper) {
  if (op == P::kNonzero) return x != T(0);
  if (op == P::kEq) return x == threshold;
  if (op == P::kNe) return x != threshold;
  if (op == P::kLt) return x < threshold;
  if (op == P::kLe) return x <= threshold;
  if (op == P::kGt) return x > threshold;
  if (op == P::kGe) return x >= threshold;
  if (op == P::kInRange) return threshold <= x && x < upper;
  if (op == P::kNotNan) return !ops::IsNan(x);
  ADD_FAILURE() << "PredicateRef: unknown predicate operator " << static_cast<int>(op);
  return false;
}

// Keeps values[i] where the predicate holds (upper: IN_RANGE only, threshold <= x < upper).
template <class T, class P, class = std::enable_if_t<std::is_enum_v<P>>>
CompactResult<T> CompactRef(const std::vector<T>& values, P op, T threshold, T upper = T(),
                            int64_t first_index = 0) {
  CompactResult<T> r;
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (!PredicateRef(op, values[i], threshold, upper)) continue;
    r.values.push_back(values[i]);
    r.indices.push_back(first_index + static_cast<int64_t>(i));
  }
  return r;
}

// ---------------------------------------------------------------------------------------------
// Seeds and random inputs

// A fresh seed from std::random_device, or GPUSCAN_TEST_SEED when set (to replay a failure).
inline uint64_t NewSeed() {
  if (const char* s = std::getenv("GPUSCAN_TEST_SEED"); s != nullptr && *s != '\0') {
    return std::strtoull(s, nullptr, 0);
  }
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) ^ static_cast<uint64_t>(rd());
}

// Declares `std::mt19937_64 rng` freshly seeded and names the seed in every failure in scope.
#define GPUSCAN_SEEDED_RNG(rng)                                                          \
  const uint64_t rng##_seed = ::gpuscan::testing::NewSeed();                            \
  SCOPED_TRACE(::testing::Message() << "random seed " << rng##_seed                     \
                                    << " (replay with GPUSCAN_TEST_SEED=" << rng##_seed \
                                    << ")");                                             \
  std::mt19937_64 rng(rng##_seed)

template <class T>
T UniformInt(std::mt19937_64& rng, T lo = std::numeric_limits<T>::lowest(),
             T hi = std::numeric_limits<T>::max()) {
  return std::uniform_int_distribution<T>(lo, hi)(rng);
}

template <class T>
T UniformReal(std::mt19937_64& rng, T lo, T hi) {
  return std::uniform_real_distribution<T>(lo, hi)(rng);
}

namespace detail {

template <class Op, template <class> class Which, class T>
inline constexpr bool kIs = std::is_same_v<Op, Which<T>>;

// A bit pattern with one random bit set.
template <class T>
T OneBit(std::mt19937_64& rng) {
  using U = std::make_unsigned_t<T>;
  const int bit = std::uniform_int_distribution<int>(0, std::numeric_limits<U>::digits - 1)(rng);
  return static_cast<T>(U(1) << bit);
}

}  // namespace detail

// n random inputs for scanning or reducing with Op, chosen so the results stay informative all
// the way through an array of n elements:
//   SUM      ints: full range (exercises wrap-around); floats: uniform in [-100, 100], mean 0,
//            so partial sums stay well inside the tolerance ExpectScanNear allows.
//   PRODUCT  ints: full-range odd numbers (the product wraps but never sticks at 0);
//            floats: +-[0.999, 1.001] (magnitudes stay near 1 for millions of elements).
//   MIN/MAX  ints: full range; floats: uniform in [-1e6, 1e6], with some +0 and -0.
//   BIT_XOR  full range.
//   BIT_AND  all ones, with one random bit cleared in about bits/2 of the n elements, so the
//            running AND still has bits left at the end (full-range inputs reach 0 within a few
//            dozen elements, after which a wrong carry would go unseen). BIT_OR the mirror image.
// Never all zeros (nor all identity) for n > 0.
template <class T, class Op>
std::vector<T> RandomInput(std::size_t n, std::mt19937_64& rng) {
  std::vector<T> v(n);
  constexpr bool kFloat = std::is_floating_point_v<T>;
  if constexpr (detail::kIs<Op, ops::Sum, T>) {
    if constexpr (kFloat) {
      for (T& x : v) x = UniformReal<T>(rng, T(-100), T(100));
    } else {
      for (T& x : v) x = UniformInt<T>(rng);
    }
  } else if constexpr (detail::kIs<Op, ops::Product, T>) {
    if constexpr (kFloat) {
      for (T& x : v) {
        x = UniformReal<T>(rng, T(0.999), T(1.001));
        if (rng() & 1) x = -x;
      }
    } else {
      for (T& x : v) x = static_cast<T>(UniformInt<T>(rng) | T(1));
    }
  } else if constexpr (detail::kIs<Op, ops::Min, T> || detail::kIs<Op, ops::Max, T>) {
    if constexpr (kFloat) {
      for (T& x : v) {
        const auto r = rng() % 64;
        x = r == 0 ? T(0) : r == 1 ? -T(0) : UniformReal<T>(rng, T(-1e6), T(1e6));
      }
    } else {
      for (T& x : v) x = UniformInt<T>(rng);
    }
  } else if constexpr (std::is_integral_v<T>) {
    constexpr int kBits = std::numeric_limits<std::make_unsigned_t<T>>::digits;
    // About bits/2 changes over the array: each bit survives with probability e^-1/2.
    const double p = n == 0 ? 1.0 : std::min(1.0, double(kBits) / (2.0 * double(n)));
    std::bernoulli_distribution change(p);
    if constexpr (detail::kIs<Op, ops::BitAnd, T>) {
      for (T& x : v) x = change(rng) ? static_cast<T>(~detail::OneBit<T>(rng)) : Op::identity();
    } else if constexpr (detail::kIs<Op, ops::BitOr, T>) {
      for (T& x : v) x = change(rng) ? detail::OneBit<T>(rng) : Op::identity();
    } else {
      for (T& x : v) x = UniformInt<T>(rng);
    }
  } else {
    static_assert(sizeof(T) == 0, "RandomInput: unknown operator");
  }
  // Guard the (astronomically unlikely) all-identity draw; Product's identity 1 is fine.
  if (n > 0) {
    bool all_identity = true;
    for (const T& x : v) {
      if (!(x == Op::identity())) {
        all_identity = false;
        break;
      }
    }
    if (all_identity) v[n / 2] = detail::kIs<Op, ops::BitAnd, T> ? T(0) : T(3);
  }
  return v;
}

// Values for compaction: half small integers (so EQ / NE / LE / GE hit exact matches; in
// [-8, 8], or [0, 16] unsigned), half spread wider; floats also get ±0, ±inf and, with
// probability nan_fraction, NaN.
template <class T>
std::vector<T> RandomCompactInput(std::size_t n, std::mt19937_64& rng, double nan_fraction = 0.0) {
  std::vector<T> v(n);
  const T small_lo = std::is_signed_v<T> ? T(-8) : T(0);
  const T small_hi = std::is_signed_v<T> ? T(8) : T(16);
  std::bernoulli_distribution nan(nan_fraction);
  for (T& x : v) {
    const auto r = rng() % 128;
    if constexpr (std::is_floating_point_v<T>) {
      if (nan_fraction > 0 && nan(rng)) {
        x = std::numeric_limits<T>::quiet_NaN();
      } else if (r == 0) {
        x = std::numeric_limits<T>::infinity();
      } else if (r == 1) {
        x = -std::numeric_limits<T>::infinity();
      } else if (r == 2) {
        x = -T(0);
      } else if (r < 64) {
        x = T(UniformInt<int>(rng, int(small_lo), int(small_hi)));
      } else {
        x = UniformReal<T>(rng, T(-100), T(100));
      }
    } else {
      x = r < 64 ? UniformInt<T>(rng, small_lo, small_hi) : UniformInt<T>(rng);
    }
  }
  if (n > 0) v[n / 2] = T(5);  // never all zeros
  return v;
}

// n flag bytes, nonzero (any of 1..255) with probability p_keep.
inline std::vector<uint8_t> RandomFlags(std::size_t n, std::mt19937_64& rng, double p_keep) {
  std::bernoulli_distribution keep(p_keep);
  std::vector<uint8_t> f(n);
  for (uint8_t& b : f) b = keep(rng) ? static_cast<uint8_t>(1 + rng() % 255) : uint8_t(0);
  return f;
}

// Splits n into random chunk lengths (summing to n) of every kind a stream may send: empty
// chunks, single elements, short ones, ones around `typical`, and long ones.
inline std::vector<std::size_t> RandomChunkLengths(std::size_t n, std::mt19937_64& rng,
                                                   std::size_t typical) {
  std::vector<std::size_t> chunks;
  std::size_t left = n;
  if (typical == 0) typical = 1;
  while (left > 0) {
    std::size_t len = 0;
    switch (rng() % 8) {
      case 0: len = 0; break;
      case 1: len = 1; break;
      case 2: len = 2 + rng() % 64; break;
      case 3: case 4: len = typical / 2 + rng() % (typical + 1); break;
      case 5: len = rng() % (3 * typical + 1); break;
      default: len = rng() % (left + 1); break;
    }
    len = std::min(len, left);
    chunks.push_back(len);
    left -= len;
  }
  chunks.push_back(0);  // a trailing empty chunk must change nothing
  return chunks;
}

// ---------------------------------------------------------------------------------------------
// Comparisons

// Prints a value for a failure message: floats with every digit and their bits.
template <class T>
std::string Show(T v) {
  std::ostringstream s;
  if constexpr (std::is_floating_point_v<T>) {
    using Bits = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
    Bits bits;
    std::memcpy(&bits, &v, sizeof(T));
    s << std::setprecision(std::numeric_limits<T>::max_digits10) << v << " (0x" << std::hex
      << bits << ")";
  } else {
    s << +v;
  }
  return s.str();
}

// Exact equality: NaN equals NaN (any payload), and for floats -0 differs from +0.
template <class T>
bool SameValue(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
    return a == b && std::signbit(a) == std::signbit(b);
  } else {
    return a == b;
  }
}

template <class T>
bool SameBits(T a, T b) {
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

// Whole arrays, bit for bit (memcmp may not be given the null data of empty vectors).
template <class T>
bool SameBits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

// Lengths around the boundaries of chunks of c elements: empty, one, c +- 1, several chunks.
inline std::vector<std::size_t> ChunkBoundaryLengths(std::size_t c) {
  return {0, 1, c - 1, c, c + 1, 3 * c, 3 * c + 1, 8 * c + 5};
}

namespace detail {

// Reports one failure naming the first bad index and how many there were.
template <class T, class Bad, class Tol>
bool CheckAll(const std::vector<T>& got, const std::vector<T>& ref, const std::string& what,
              const Bad& bad, const Tol& tolerance_note) {
  if (got.size() != ref.size()) {
    ADD_FAILURE() << what << ": got " << got.size() << " elements, expected " << ref.size();
    return false;
  }
  std::size_t first = 0, count = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (bad(i)) {
      if (count++ == 0) first = i;
    }
  }
  if (count == 0) return true;
  ADD_FAILURE() << what << ": " << count << " of " << got.size() << " elements differ; first at ["
                << first << "]: got " << Show(got[first]) << ", expected " << Show(ref[first])
                << tolerance_note(first);
  return false;
}

}  // namespace detail

// Element-by-element SameValue. Returns whether all matched.
template <class T>
bool ExpectEqualValues(const std::vector<T>& got, const std::vector<T>& ref,
                       const std::string& what = "values") {
  return detail::CheckAll(
      got, ref, what, [&](std::size_t i) { return !SameValue(got[i], ref[i]); },
      [](std::size_t) { return std::string(); });
}

// Bit-for-bit equality (determinism checks).
template <class T>
bool ExpectSameBits(const std::vector<T>& got, const std::vector<T>& ref,
                    const std::string& what = "values") {
  return detail::CheckAll(
      got, ref, what, [&](std::size_t i) { return !SameBits(got[i], ref[i]); },
      [](std::size_t) { return std::string(); });
}

// How far a float SUM / PRODUCT result computed in another association order may stray from
// the sequential one (both round; the bounds leave a wide margin over what random inputs
// from RandomInput produce, yet a lost or doubled element shows).
//   SUM:     |got - ref| <= kSumK * eps * (sum of |x| over the elements reduced)
//   PRODUCT: |got - ref| <= kProductK * eps * sqrt(count + 1) * |ref|   (rounding errors of
//            random factors add up like a random walk)
inline constexpr double kSumK = 16;
inline constexpr double kProductK = 32;

template <class T, class Op>
inline constexpr bool kRounds = std::is_floating_point_v<T> &&
                                (detail::kIs<Op, ops::Sum, T> || detail::kIs<Op, ops::Product, T>);

// Compares a result that reduced `count` elements whose absolute values sum to abs_sum.
template <class T, class Op>
bool WithinTolerance(T got, T ref, double abs_sum, double count, double* tolerance = nullptr) {
  if constexpr (!kRounds<T, Op>) {
    (void)abs_sum;
    (void)count;
    (void)tolerance;
    return SameValue(got, ref);
  } else {
    if (std::isnan(ref) || std::isinf(ref)) return SameValue(got, ref);
    if (std::isnan(got) || std::isinf(got)) return false;
    constexpr double eps = std::numeric_limits<T>::epsilon();
    double tol;
    if constexpr (detail::kIs<Op, ops::Sum, T>) {
      tol = kSumK * eps * abs_sum;
    } else {
      tol = kProductK * eps * std::sqrt(count + 1) * std::fabs(double(ref));
    }
    tol += double(std::numeric_limits<T>::denorm_min());
    if (tolerance) *tolerance = tol;
    return std::fabs(double(got) - double(ref)) <= tol;
  }
}

// Compares a scan of `input` with its reference: exact for integers, MIN, MAX and bitwise
// operators; for float SUM and PRODUCT within the bounds above (NaN must match NaN and ±inf
// must match exactly). Reports the first mismatching index only.
template <class T, class Op>
bool ExpectScanNear(const std::vector<T>& got, const std::vector<T>& ref,
                    const std::vector<T>& input, bool exclusive, const std::string& what = "scan") {
  if constexpr (!kRounds<T, Op>) {
    (void)input;
    (void)exclusive;
    return ExpectEqualValues(got, ref, what);
  } else {
    if (input.size() != ref.size()) {
      ADD_FAILURE() << what << ": input has " << input.size() << " elements, reference "
                    << ref.size();
      return false;
    }
    // abs_sum[i]: sum of |x| over the elements out[i] reduces.
    std::vector<double> abs_sum(input.size());
    double acc = 0;
    for (std::size_t i = 0; i < input.size(); ++i) {
      if (exclusive) abs_sum[i] = acc;
      acc += std::fabs(double(input[i]));
      if (!exclusive) abs_sum[i] = acc;
    }
    auto count = [&](std::size_t i) { return double(exclusive ? i : i + 1); };
    return detail::CheckAll(
        got, ref, what,
        [&](std::size_t i) {
          return !WithinTolerance<T, Op>(got[i], ref[i], abs_sum[i], count(i));
        },
        [&](std::size_t i) {
          double tol = 0;
          WithinTolerance<T, Op>(got[i], ref[i], abs_sum[i], count(i), &tol);
          std::ostringstream s;
          s << std::setprecision(6) << " (tolerance " << tol << ", |difference| "
            << std::fabs(double(got[i]) - double(ref[i])) << ")";
          return s.str();
        });
  }
}

// Compares a reduction of `input` with its reference, with the same rules as ExpectScanNear.
template <class T, class Op>
bool ExpectReduceNear(T got, T ref, const std::vector<T>& input, const std::string& what = "reduce") {
  double abs_sum = 0;
  for (const T& x : input) abs_sum += std::fabs(double(x));
  double tol = 0;
  if (WithinTolerance<T, Op>(got, ref, abs_sum, double(input.size()), &tol)) return true;
  ADD_FAILURE() << what << " of " << input.size() << " elements: got " << Show(got)
                << ", expected " << Show(ref)
                << (kRounds<T, Op> ? " (tolerance " + std::to_string(tol) + ")" : std::string());
  return false;
}

// Whether two buffers hold the same bytes (memcmp may not be given a null pointer, which an
// empty vector's data() can be, even for 0 bytes).
inline bool SameBytes(const void* a, const void* b, std::size_t bytes) {
  return bytes == 0 || std::memcmp(a, b, bytes) == 0;
}

// Segmented scans (gpuscan.v1.SegmentedScanHeader): heads[i] != 0 where a segment begins
// (element 0 always begins one); each segment scanned on its own, sequentially.
template <class T, class Op>
std::vector<T> SegmentedScanRef(const std::vector<T>& x, const std::vector<uint8_t>& heads, bool exclusive) {
  const Op op;
  std::vector<T> out(x.size());
  T acc = Op::identity();
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (i == 0 || heads[i] != 0) acc = Op::identity();
    if (exclusive) {
      out[i] = acc;
      acc = op(acc, x[i]);
    } else {
      acc = i == 0 || heads[i] != 0 ? x[i] : op(acc, x[i]);  // no identity added (-0.0 stays -0.0)
      out[i] = acc;
    }
  }
  return out;
}

// The heads of a key array: 1 where the key differs from the one before (and at 0).
template <class K>
std::vector<uint8_t> HeadsOfKeys(const std::vector<K>& keys) {
  std::vector<uint8_t> h(keys.size());
  for (std::size_t i = 0; i < keys.size(); ++i) h[i] = i == 0 || keys[i] != keys[i - 1];
  return h;
}

// Reduce by key: one (key, op over the run's values in order) per run of equal consecutive keys.
template <class T, class Op, class K>
std::pair<std::vector<K>, std::vector<T>> ReduceByKeyRef(const std::vector<T>& x, const std::vector<K>& keys) {
  const Op op;
  std::pair<std::vector<K>, std::vector<T>> out;
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (i == 0 || keys[i] != keys[i - 1]) {
      out.first.push_back(keys[i]);
      out.second.push_back(x[i]);
    } else {
      out.second.back() = op(out.second.back(), x[i]);
    }
  }
  return out;
}

// n keys in runs: mostly random lengths around mean_run (some of length 1), one run several
// times longer, and runs whose key repeats an earlier run's (equal keys apart are distinct
// segments). Never all one key for n > 2.
template <class K>
std::vector<K> RandomSegmentKeys(std::size_t n, std::mt19937_64& rng, std::size_t mean_run) {
  std::vector<K> keys(n);
  std::size_t i = 0;
  K key = static_cast<K>(rng());
  const std::size_t long_at = n / 3;
  while (i < n) {
    std::size_t len = rng() % 5 == 0 ? 1 : 1 + rng() % (2 * mean_run);
    if (i <= long_at && long_at < i + len) len += 8 * mean_run;
    K next = static_cast<K>(rng() % 4 == 0 ? key - 1 : rng());  // -1: an old key may come back
    if (next == key) ++next;
    key = next;
    for (std::size_t j = 0; j < len && i < n; ++j) keys[i++] = key;
  }
  return keys;
}

// A histogram the obvious way (numpy.histogram's semantics; see gpuscan.v1.HistogramHeader):
// bins + 3 counts, as the engines return them: each bin, then below, above and NaN. An element
// goes to the last bin whose left edge is <= it (so repeated edges leave their bins empty and
// the last bin also takes the top edge), found by std::upper_bound over the left edges.
template <class T>
std::vector<uint64_t> HistogramRef(const std::vector<T>& x, const std::vector<double>& edges) {
  const size_t bins = edges.size() - 1;
  std::vector<uint64_t> c(bins + 3);
  for (const T v : x) {
    if (v != v) {
      ++c[bins + 2];
      continue;
    }
    const double d = static_cast<double>(v);
    if (d < edges.front()) {
      ++c[bins];
    } else if (d > edges.back()) {
      ++c[bins + 1];
    } else {
      ++c[static_cast<size_t>(std::upper_bound(edges.begin(), edges.end() - 1, d) - edges.begin()) - 1];
    }
  }
  return c;
}

// Histogram input for edges over about [-100, 100]: values drawn from the edges themselves (the
// boundary cases), from inside and outside the range, and for floats 1-3 ulps off an edge, NaN
// and +-inf; never zeros.
template <class T>
std::vector<T> HistogramInput(std::size_t n, const std::vector<double>& edges, std::mt19937_64& rng) {
  std::vector<T> v(n);
  for (T& x : v) {
    const double u = std::uniform_real_distribution<double>(-130, 130)(rng);
    x = std::is_unsigned_v<T> ? static_cast<T>(std::abs(u)) : static_cast<T>(u);
    switch (rng() % 8) {
      case 0: {  // an edge itself, where T holds it (converting a value T cannot hold is undefined;
                 // half the max, since double(max) of a 64-bit T rounds above it)
        const double e = edges[rng() % edges.size()];
        if (std::is_floating_point_v<T> || (e >= static_cast<double>(std::numeric_limits<T>::lowest()) &&
                                            e <= static_cast<double>(std::numeric_limits<T>::max()) / 2)) {
          x = static_cast<T>(e);
        }
        break;
      }
      case 1:
        if constexpr (std::is_floating_point_v<T>) {
          const T special[] = {std::numeric_limits<T>::quiet_NaN(), std::numeric_limits<T>::infinity(),
                               -std::numeric_limits<T>::infinity()};
          x = special[rng() % 3];
        }
        break;
      case 2:  // 1-3 ulps off an edge, either side: where a binning by arithmetic goes wrong
        if constexpr (std::is_floating_point_v<T>) {
          x = static_cast<T>(edges[rng() % edges.size()]);
          const T toward = (rng() & 1) ? std::numeric_limits<T>::infinity() : -std::numeric_limits<T>::infinity();
          for (int k = 1 + static_cast<int>(rng() % 3); k > 0; --k) x = std::nextafter(x, toward);
        }
        break;
      default:
        break;
    }
  }
  return v;
}

}  // namespace gpuscan::testing
