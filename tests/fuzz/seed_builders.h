// The seed corpus's builders (replay_main.cc's seeds, resident_seeds.cc's): RPC numbers and
// limits bytes of EncodeInput, headers, and random data of fixed seed (one generator: the seeds
// are written in one order, so their bytes stay as they were).
#pragma once

#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "gpuscan/v1/gpuscan.pb.h"
#include "request_fuzz_target.h"

namespace gpuscan::fuzz::seeds {

namespace v1 = gpuscan::v1;

inline constexpr int kScan = 0, kReduce = 1, kCompact = 2, kHistogram = 3, kScan2D = 4, kSegmentedScan = 5,
              kReduceByKey = 6, kSort = 7;
// Limits byte: chunk limit 8 << (b & 7); max request bytes {0, 64, 512, 4096}[(b >> 3) & 3].
inline constexpr uint8_t kChunk1K = 7, kChunk256 = 5, kChunk64 = 3;
inline constexpr uint8_t kMax512 = 2 << 3, kMax4K = 3 << 3;
inline constexpr uint8_t kSortMax512 = 2 << 5;  // Sort's --max-sort-bytes=512
// Resident calls (EncodeInput's rpc 8..19); their limits byte: --resident-bytes {4096, 0, 512,
// 65536}[(b >> 3) & 3] (4096 unless set), --tenant-quota-bytes {0, 64, 512, 4096}[(b >> 5) & 3].
inline constexpr int kPutArray = 8, kGetArray = 9, kDropArray = 10, kListArrays = 11, kScanResident = 12,
              kReduceResident = 13, kCompactResident = 14, kHistogramResident = 15, kScan2DResident = 16,
              kSegmentedScanResident = 17, kReduceByKeyResident = 18, kSortResident = 19;
inline constexpr uint8_t kNotServed = 1 << 3, kBudget512 = 2 << 3, kQuota64 = 1 << 5;
// Pipeline (EncodeInput's rpc 20; its limits byte as the resident calls'), and its plan alone (21).
inline constexpr int kPipeline = 20, kPipelinePlan = 21;
inline constexpr uint8_t kBudget64K = 3 << 3;

inline std::mt19937_64 rng(20261122);  // fixed: the seeds are reproducible

// `bytes` random bytes with no zero element (elements of `size` bytes).
inline std::string NonZero(size_t bytes, size_t size = 1) {
  std::string s(bytes, '\0');
  for (auto& c : s) c = static_cast<char>(rng());
  for (size_t i = 0; i + size <= bytes; i += size) s[i] = static_cast<char>(1 + rng() % 255);
  return s;
}

template <class H>
SeedRequest Head(const H& h, std::string data = {}, std::string flags = {}) {
  SeedRequest r;
  r.has_header = true;
  r.header = h.SerializeAsString();
  r.data = std::move(data);
  r.flags = std::move(flags);
  return r;
}
inline SeedRequest Chunk(std::string data, std::string flags = {}) {
  SeedRequest r;
  r.data = std::move(data);
  r.flags = std::move(flags);
  return r;
}
inline v1::ScanHeader ScanH(v1::DType d, v1::Operator op, bool exclusive = false) {
  v1::ScanHeader h;
  h.set_dtype(d);
  h.set_op(op);
  if (exclusive) h.set_kind(v1::SCAN_KIND_EXCLUSIVE);
  return h;
}
inline v1::ReduceHeader ReduceH(v1::DType d, v1::Operator op) {
  v1::ReduceHeader h;
  h.set_dtype(d);
  h.set_op(op);
  return h;
}
inline v1::CompactHeader FlagsH(v1::DType d, v1::CompactOutput out = v1::COMPACT_OUTPUT_VALUES) {
  v1::CompactHeader h;
  h.set_dtype(d);
  h.set_use_flags(true);
  h.set_output(out);
  return h;
}
inline v1::HistogramHeader EvenH(v1::DType d, uint32_t bins, double lo, double hi) {
  v1::HistogramHeader h;
  h.set_dtype(d);
  h.set_bins(bins);
  h.set_lo(lo);
  h.set_hi(hi);
  return h;
}
inline v1::HistogramHeader EdgesH(v1::DType d, std::vector<double> edges) {
  v1::HistogramHeader h;
  h.set_dtype(d);
  h.mutable_edges()->Add(edges.begin(), edges.end());
  return h;
}
inline v1::Scan2DHeader Scan2DH(v1::DType d, v1::Operator op, uint64_t cols) {
  v1::Scan2DHeader h;
  h.set_dtype(d);
  h.set_op(op);
  h.set_cols(cols);
  return h;
}
// Flags with about half the elements kept (nonzero bytes of any value).
inline std::string Flags(size_t n) {
  std::string f(n, '\0');
  for (auto& c : f) c = rng() & 1 ? static_cast<char>(1 + rng() % 255) : '\0';
  return f;
}
inline v1::SegmentedScanHeader SegKeysH(v1::DType d, v1::Operator op, v1::DType key, bool exclusive = false) {
  v1::SegmentedScanHeader h;
  h.set_dtype(d);
  h.set_op(op);
  if (exclusive) h.set_kind(v1::SCAN_KIND_EXCLUSIVE);
  h.set_key_dtype(key);
  return h;
}
inline v1::SegmentedScanHeader SegHeadsH(v1::DType d, v1::Operator op, bool exclusive = false) {
  v1::SegmentedScanHeader h;
  h.set_dtype(d);
  h.set_op(op);
  if (exclusive) h.set_kind(v1::SCAN_KIND_EXCLUSIVE);
  h.set_heads(true);
  return h;
}
inline v1::ReduceByKeyHeader ByKeyH(v1::DType d, v1::Operator op, v1::DType key) {
  v1::ReduceByKeyHeader h;
  h.set_dtype(d);
  h.set_op(op);
  h.set_key_dtype(key);
  return h;
}
inline v1::SortHeader SortH(v1::DType d, v1::SortOutput out, bool descending = false,
                     v1::DType values = v1::DTYPE_UNSPECIFIED) {
  v1::SortHeader h;
  h.set_dtype(d);
  h.set_output(out);
  h.set_descending(descending);
  h.set_values_dtype(values);
  return h;
}
// n keys of `size` bytes in runs of equal keys (1 to 2 x mean_run long); now and then a run takes
// the key of the run before the last (equal keys apart are distinct segments).
inline std::string RunKeys(size_t n, size_t size, size_t mean_run) {
  std::string s;
  uint64_t key = rng(), before = key;
  for (size_t i = 0; i < n;) {
    const size_t len = 1 + rng() % (2 * mean_run);
    uint64_t next = rng() % 4 == 0 ? before : rng();
    if (next == key) ++next;
    before = key;
    key = next;
    for (size_t j = 0; j < len && i < n; ++j, ++i) s.append(reinterpret_cast<const char*>(&key), size);
  }
  return s;
}
// n head bytes, about a quarter of them nonzero (any value).
inline std::string Heads(size_t n) {
  std::string f(n, '\0');
  for (auto& c : f) c = rng() % 4 == 0 ? static_cast<char>(1 + rng() % 255) : '\0';
  return f;
}
// n raw floats uniform in [-100, 100): sums round, so the association shows in the bits.
template <class T>
std::string Reals(size_t n) {
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    const T x = static_cast<T>(double(rng() >> 11) * 0x1p-53 * 200 - 100);
    s.append(reinterpret_cast<const char*>(&x), sizeof(T));
  }
  return s;
}
// n raw elements of T for sorts and float scans: repeats (small integers), random bits, and for
// floats +-0, +-inf and NaNs of both signs with random payloads.
template <class T>
std::string Keys(size_t n) {
  using U = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    const U bits = static_cast<U>(rng());
    T x;
    std::memcpy(&x, &bits, sizeof(T));
    const auto r = rng() % 8;
    if (r < 3) x = static_cast<T>(int(rng() % 9) - 4);
    if constexpr (std::is_floating_point_v<T>) {
      constexpr U kExponent = sizeof(T) == 4 ? U(0x7f800000u) : U(0x7ff0000000000000ull);
      const T special[] = {T(0), -T(0), std::numeric_limits<T>::infinity(), -std::numeric_limits<T>::infinity()};
      if (r == 3) x = special[rng() % 4];
      if (r == 4) {  // a NaN: every exponent bit, a random nonzero payload, either sign
        const U nan = bits | kExponent | 1;
        std::memcpy(&x, &nan, sizeof(T));
      }
    }
    s.append(reinterpret_cast<const char*>(&x), sizeof(T));
  }
  return s;
}

}  // namespace gpuscan::fuzz::seeds
