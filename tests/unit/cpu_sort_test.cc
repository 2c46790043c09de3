// CPU engine sorts (issue 13) against std::stable_sort with a comparator written from the
// order's definition (not from sort_keys.h's coding): every dtype, ascending and descending,
// many equal keys (stability), floats with -NaN, +NaN, -inf, +inf, -0 and +0; keys, the
// permutation and values moved along; the same result on one thread and many.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "engine_runner.h"

namespace gpuscan::unit {
namespace {

using engine::SortSpec;

// a < b in the sort's order: IEEE totalOrder for floats (only the canonical NaN payload is
// drawn, so NaNs of one sign are equal), plain < otherwise.
template <class T>
bool Before(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    auto rank = [](T x) { return std::isnan(x) ? (std::signbit(x) ? 0 : 2) : 1; };
    if (rank(a) != rank(b)) return rank(a) < rank(b);
    if (rank(a) != 1) return false;
    if (a == b) return std::signbit(a) && !std::signbit(b);  // -0 < +0
    return a < b;
  } else {
    return a < b;
  }
}

template <class T>
std::vector<T> SortInput(std::size_t n, std::mt19937_64& rng) {
  std::vector<T> v(n);
  for (T& x : v) {
    const auto r = rng() % 16;
    if constexpr (std::is_floating_point_v<T>) {
      const T nan = std::numeric_limits<T>::quiet_NaN(), inf = std::numeric_limits<T>::infinity();
      const T special[] = {nan, -nan, inf, -inf, T(0), -T(0)};
      x = r < 3 ? special[rng() % 6] : r < 10 ? T(int(rng() % 9) - 4) : testing::UniformReal<T>(rng, T(-1e6), T(1e6));
    } else {
      x = r < 10 ? static_cast<T>(rng() % 9) : testing::UniformInt<T>(rng);  // many equal keys
    }
  }
  return v;
}

template <class T>
void CheckSorts(std::size_t n) {
  GPUSCAN_SEEDED_RNG(rng);
  const std::vector<T> keys = SortInput<T>(n, rng);
  std::vector<int64_t> payload(n);
  for (auto& p : payload) p = static_cast<int64_t>(rng());
  CpuEngine one(1), many(0);
  for (const bool descending : {false, true}) {
    std::vector<int64_t> order(n);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
      return descending ? Before(keys[b], keys[a]) : Before(keys[a], keys[b]);
    });
    std::vector<T> want_keys(n);
    std::vector<int64_t> want_values(n);
    for (std::size_t i = 0; i < n; ++i) {
      want_keys[i] = keys[order[i]];
      want_values[i] = payload[order[i]];
    }
    for (CpuEngine* e : {&one, &many}) {
      const std::string what = std::string(engine::Name(DTypeOf<T>())) + (descending ? " descending" : " ascending") +
                               ", n=" + std::to_string(n) + ", threads " + std::to_string(e->threads());
      SortSpec spec;
      spec.dtype = DTypeOf<T>();
      spec.descending = descending;
      spec.want_indices = true;
      spec.has_values = true;
      spec.values_dtype = DType::kInt64;
      std::vector<T> got_keys = Poisoned<T>(n);
      std::vector<int64_t> got_values = Poisoned<int64_t>(n), got_idx = Poisoned<int64_t>(n);
      StageTimes times;
      EXPECT_EQ(e->Sort(spec, keys.data(), payload.data(), n, got_keys.data(), got_values.data(), got_idx.data(), times),
                "parallel_sort");
      ASSERT_TRUE(testing::SameBytes(got_keys.data(), want_keys.data(), n * sizeof(T)))
          << what << ": keys differ in their bits";
      EXPECT_EQ(got_idx, order) << what << ": not the stable permutation";
      EXPECT_EQ(got_values, want_values) << what << ": values not moved with their keys";
    }
  }
}

TEST(CpuSort, EveryDTypeBothDirectionsStable) {
  for (const std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{2}, std::size_t{1000}, std::size_t{70001}}) {
    CheckSorts<int32_t>(n);
    CheckSorts<int64_t>(n);
    CheckSorts<uint32_t>(n);
    CheckSorts<uint64_t>(n);
    CheckSorts<float>(n);
    CheckSorts<double>(n);
  }
}

}  // namespace
}  // namespace gpuscan::unit
