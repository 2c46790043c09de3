// The soak's calls, one per operation: the inputs each draws, the call on the Client and the
// check of its result against an independent reference (workload.h says what is drawn and why).
#include "workload_calls.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <type_traits>
#include <vector>

#include "reference.h"

namespace gpuscan::soak {
namespace {

template <class T>
struct Type {
  using type = T;
};

template <class F>
decltype(auto) WithType(v1::DType d, F&& f) {
  switch (d) {
    case v1::DTYPE_INT32: return f(Type<int32_t>{});
    case v1::DTYPE_INT64: return f(Type<int64_t>{});
    case v1::DTYPE_UINT32: return f(Type<uint32_t>{});
    case v1::DTYPE_UINT64: return f(Type<uint64_t>{});
    case v1::DTYPE_FLOAT32: return f(Type<float>{});
    default: return f(Type<double>{});
  }
}

template <class T, class F>
decltype(auto) WithOp(v1::Operator op, F&& f) {
  if constexpr (std::is_integral_v<T>) {
    switch (op) {
      case v1::OPERATOR_BIT_AND: return f(Type<ops::BitAnd<T>>{});
      case v1::OPERATOR_BIT_OR: return f(Type<ops::BitOr<T>>{});
      case v1::OPERATOR_BIT_XOR: return f(Type<ops::BitXor<T>>{});
      default: break;
    }
  }
  switch (op) {
    case v1::OPERATOR_PRODUCT: return f(Type<ops::Product<T>>{});
    case v1::OPERATOR_MIN: return f(Type<ops::Min<T>>{});
    case v1::OPERATOR_MAX: return f(Type<ops::Max<T>>{});
    default: return f(Type<ops::Sum<T>>{});
  }
}

template <class T>
void SetScalar(v1::Scalar* s, T v) {
  if constexpr (std::is_floating_point_v<T>) {
    s->set_float_value(double(v));
  } else if constexpr (std::is_signed_v<T>) {
    s->set_int_value(int64_t(v));
  } else {
    s->set_uint_value(uint64_t(v));
  }
}

template <class F>
decltype(auto) WithKeyType(v1::DType d, F&& f) {
  switch (d) {
    case v1::DTYPE_INT64: return f(Type<int64_t>{});
    case v1::DTYPE_UINT32: return f(Type<uint32_t>{});
    case v1::DTYPE_UINT64: return f(Type<uint64_t>{});
    default: return f(Type<int32_t>{});
  }
}

// ---- checks (on the fly where they can be: no reference arrays, so a 64 MiB call costs no
// extra memory)

template <class T>
std::string Mismatch(const char* what, size_t i, T got, T ref) {
  return std::string(what) + " " + std::to_string(i) + ": got " + testing::Show(got) + ", expected " +
         testing::Show(ref);
}

template <class T, class Op>
bool CheckScan(const std::vector<T>& x, const T* got, size_t got_n, bool exclusive, std::string* why) {
  if (got_n != x.size()) {
    *why = "got " + std::to_string(got_n) + " elements, expected " + std::to_string(x.size());
    return false;
  }
  const Op op;
  T acc = Op::identity();
  double abs_sum = 0;  // sum of |x| over the elements out[i] reduces
  for (size_t i = 0; i < x.size(); ++i) {
    T ref;
    double count;
    if (exclusive) {
      ref = acc;
      count = double(i);
      if (!testing::WithinTolerance<T, Op>(got[i], ref, abs_sum, count)) {
        *why = Mismatch("element", i, got[i], ref);
        return false;
      }
      acc = op(acc, x[i]);
      abs_sum += std::fabs(double(x[i]));
    } else {
      acc = op(acc, x[i]);
      abs_sum += std::fabs(double(x[i]));
      ref = acc;
      count = double(i + 1);
      if (!testing::WithinTolerance<T, Op>(got[i], ref, abs_sum, count)) {
        *why = Mismatch("element", i, got[i], ref);
        return false;
      }
    }
  }
  return true;
}

// A segmented scan: heads[i] != 0 where a segment begins (element 0 always does); each segment
// scanned on its own as testing::SegmentedScanRef does (inclusive: no identity folded in),
// float SUM / PRODUCT within the tolerance of the segment's own elements.
template <class T, class Op>
bool CheckSegmentedScan(const std::vector<T>& x, const std::vector<uint8_t>& heads, const std::vector<T>& got,
                        bool exclusive, std::string* why) {
  if (got.size() != x.size()) {
    *why = "got " + std::to_string(got.size()) + " elements, expected " + std::to_string(x.size());
    return false;
  }
  const Op op;
  T acc = Op::identity();
  double abs_sum = 0, count = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const bool head = i == 0 || heads[i] != 0;
    T ref;
    if (exclusive) {
      if (head) acc = Op::identity(), abs_sum = 0, count = 0;
      ref = acc;
      if (!testing::WithinTolerance<T, Op>(got[i], ref, abs_sum, count)) {
        *why = Mismatch("element", i, got[i], ref);
        return false;
      }
      acc = op(acc, x[i]);
      abs_sum += std::fabs(double(x[i]));
      count += 1;
    } else {
      if (head) {
        acc = x[i], abs_sum = 0, count = 0;
      } else {
        acc = op(acc, x[i]);
      }
      abs_sum += std::fabs(double(x[i]));
      count += 1;
      ref = acc;
      if (!testing::WithinTolerance<T, Op>(got[i], ref, abs_sum, count)) {
        *why = Mismatch("element", i, got[i], ref);
        return false;
      }
    }
  }
  return true;
}

// PredicateRef's vocabulary (the wire's PredicateOp, less UNSPECIFIED, same order).
enum class Pred { kNonzero, kEq, kNe, kLt, kLe, kGt, kGe, kInRange, kNotNan };
Pred ToPred(v1::PredicateOp p) { return static_cast<Pred>(int(p) - int(v1::PREDICATE_OP_NONZERO)); }

template <class T>
bool CheckCompact(const std::vector<T>& x, const std::vector<uint8_t>& flags, const Plan& plan, T lo, T hi,
                  const CompactResult<T>& got, std::string* why) {
  const bool want_values = plan.output != v1::COMPACT_OUTPUT_INDICES;
  const bool want_indices = plan.output != v1::COMPACT_OUTPUT_VALUES;
  uint64_t k = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const bool keep = plan.use_flags ? flags[i] != 0 : testing::PredicateRef(ToPred(plan.predicate), x[i], lo, hi);
    if (!keep) continue;
    if (want_values && (k >= got.values.size() || !testing::SameBits(got.values[k], x[i]))) {
      *why = "kept value #" + std::to_string(k) + ": got " +
             (k < got.values.size() ? testing::Show(got.values[k]) : std::string("nothing")) + ", expected " +
             testing::Show(x[i]) + " (element " + std::to_string(i) + ")";
      return false;
    }
    if (want_indices && (k >= got.indices.size() || got.indices[k] != int64_t(i))) {
      *why = "kept index #" + std::to_string(k) + ": got " +
             (k < got.indices.size() ? std::to_string(got.indices[k]) : std::string("nothing")) + ", expected " +
             std::to_string(i);
      return false;
    }
    ++k;
  }
  if (got.kept_count != k || (want_values && got.values.size() != k) || (want_indices && got.indices.size() != k) ||
      (!want_values && !got.values.empty()) || (!want_indices && !got.indices.empty())) {
    *why = "kept_count " + std::to_string(got.kept_count) + ", values " + std::to_string(got.values.size()) +
           ", indices " + std::to_string(got.indices.size()) + "; expected " + std::to_string(k) + " kept";
    return false;
  }
  return true;
}

// ---- inputs

template <class T, class Op>
std::vector<T> ScanInput(const Plan& plan, std::mt19937_64& rng) {
  return testing::RandomInput<T, Op>(plan.elements, rng);
}

// Segment heads: keys in runs of about plan.mean_run (equal keys apart are separate segments).
template <class K>
std::vector<K> SegmentKeys(const Plan& plan, std::mt19937_64& rng) {
  return testing::RandomSegmentKeys<K>(plan.elements, rng, plan.mean_run);
}

// Sort keys with many equal keys (so stability shows): half small integers, half spread wider;
// floats also get +-0, +-inf and NaNs of both signs.
template <class T>
std::vector<T> SortKeys(size_t n, std::mt19937_64& rng) {
  std::vector<T> v = testing::RandomCompactInput<T>(n, rng, std::is_floating_point_v<T> ? 0.01 : 0.0);
  if constexpr (std::is_floating_point_v<T>) {
    for (T& x : v) {
      if (std::isnan(x) && (rng() & 1)) x = std::copysign(x, T(-1));
    }
  }
  return v;
}

// ---- an independent stable sort: IEEE 754 totalOrder for floats (-NaN < -inf < ... < -0 < +0
// < ... < +inf < +NaN), input order kept among equal keys, ascending and descending alike.
template <class T>
auto TotalOrderKey(T v) {
  if constexpr (std::is_floating_point_v<T>) {
    using U = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
    U bits;
    std::memcpy(&bits, &v, sizeof(T));
    constexpr U sign = U(1) << (8 * sizeof(T) - 1);
    return (bits & sign) ? U(~bits) : U(bits | sign);
  } else {
    return v;
  }
}

template <class T>
std::vector<int64_t> StablePermutation(const std::vector<T>& keys, bool descending) {
  using K = decltype(TotalOrderKey(T{}));
  std::vector<K> order(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) order[i] = TotalOrderKey(keys[i]);
  std::vector<int64_t> perm(keys.size());
  for (size_t i = 0; i < perm.size(); ++i) perm[i] = int64_t(i);
  if (descending) {
    std::stable_sort(perm.begin(), perm.end(), [&](int64_t a, int64_t b) { return order[a] > order[b]; });
  } else {
    std::stable_sort(perm.begin(), perm.end(), [&](int64_t a, int64_t b) { return order[a] < order[b]; });
  }
  return perm;
}

// ---- the calls

template <class T, class Op>
void RunScan(Client& client, const Plan& plan, std::mt19937_64& rng, RegionPool* pool, Outcome& out) {
  const std::vector<T> x = ScanInput<T, Op>(plan, rng);
  out.bytes_out = x.size() * sizeof(T);
  if (plan.transport == Transport::kShm) {
    const uint64_t bytes = x.size() * sizeof(T);
    SharedRegion in = pool->Take(bytes);
    std::memcpy(in.data(), x.data(), bytes);
    SharedRegion res;
    if (!plan.in_place) res = pool->Take(bytes);
    v1::ScanHeader h;
    h.set_dtype(plan.dtype);
    h.set_op(plan.op);
    h.set_kind(plan.exclusive ? v1::SCAN_KIND_EXCLUSIVE : v1::SCAN_KIND_INCLUSIVE);
    client.ScanShared(h, in, bytes, plan.in_place ? nullptr : &res);
    out.rpc_ok = true;
    out.correct = CheckScan<T, Op>(x, (plan.in_place ? in : res).template as<T>(), x.size(), plan.exclusive, &out.error);
    pool->Give(std::move(in));
    if (!plan.in_place) pool->Give(std::move(res));
    return;
  }
  ScanOptions o;
  o.op = plan.op;
  o.exclusive = plan.exclusive;
  if (plan.transport == Transport::kResident) {
    // Put, then the scan where the array lies: its result streamed back, or kept and got.
    RemoteArray a = client.Put(x);
    const std::vector<T> values = plan.in_place ? client.Scan(a, o, ResidentOptions{}).template Get<T>()
                                                : client.Scan<T>(a, o).values;
    out.rpc_ok = true;
    out.correct = CheckScan<T, Op>(x, values.data(), values.size(), plan.exclusive, &out.error);
    if (out.correct && values.size() != x.size()) {
      out.correct = false;
      out.error = std::to_string(values.size()) + " elements, expected " + std::to_string(x.size());
    }
    return;
  }
  o.lanes = plan.lanes;
  const ScanResult<T> r = client.Scan(x, o);
  out.rpc_ok = true;
  out.bytes_out = r.values.size() * sizeof(T);
  out.correct = CheckScan<T, Op>(x, r.values.data(), r.values.size(), plan.exclusive, &out.error);
}

template <class T, class Op>
void RunReduce(Client& client, const Plan& plan, std::mt19937_64& rng, RegionPool* pool, Outcome& out) {
  const std::vector<T> x = testing::RandomInput<T, Op>(plan.elements, rng);
  ReduceResult<T> r;
  if (plan.transport == Transport::kShm) {
    const uint64_t bytes = x.size() * sizeof(T);
    SharedRegion in = pool->Take(bytes);
    std::memcpy(in.data(), x.data(), bytes);
    v1::ReduceHeader h;
    h.set_dtype(plan.dtype);
    h.set_op(plan.op);
    const v1::ReduceResponse resp = client.ReduceShared(h, in, bytes);
    pool->Give(std::move(in));
    if (resp.raw_value().size() != sizeof(T)) {
      out.rpc_ok = true;
      out.error = "raw_value of " + std::to_string(resp.raw_value().size()) + " bytes";
      return;
    }
    std::memcpy(&r.value, resp.raw_value().data(), sizeof(T));
    r.element_count = resp.element_count();
  } else if (plan.transport == Transport::kResident) {
    RemoteArray a = client.Put(x);
    r = client.Reduce<T>(a, plan.op);
  } else {
    r = client.Reduce(x, plan.op, plan.lanes);
  }
  out.rpc_ok = true;
  out.bytes_out = sizeof(T);
  const T ref = testing::ReduceRef<T, Op>(x);
  double abs_sum = 0;
  for (const T& v : x) abs_sum += std::fabs(double(v));
  if (r.element_count != x.size()) {
    out.error = "element_count " + std::to_string(r.element_count) + ", expected " + std::to_string(x.size());
  } else if (!testing::WithinTolerance<T, Op>(r.value, ref, abs_sum, double(x.size()))) {
    out.error = "got " + testing::Show(r.value) + ", expected " + testing::Show(ref);
  } else {
    out.correct = true;
  }
}

template <class T>
void RunCompact(Client& client, const Plan& plan, std::mt19937_64& rng, RegionPool* pool, Outcome& out) {
  const std::vector<T> x = testing::RandomCompactInput<T>(plan.elements, rng, IsFloat(plan.dtype) ? 0.01 : 0.0);
  CompactOptions o;
  o.output = plan.output;
  o.lanes = plan.lanes;
  T lo{}, hi{};
  if (plan.use_flags) {
    o.use_flags = true;
    o.flags = testing::RandomFlags(plan.elements, rng, std::uniform_real_distribution<double>(0.0, 1.0)(rng));
  } else {
    o.predicate.set_op(plan.predicate);
    // Thresholds from the data itself, so EQ and the range bounds hit real values.
    lo = x[rng() % x.size()];
    hi = x[rng() % x.size()];
    if (hi < lo) std::swap(lo, hi);
    if (plan.predicate != v1::PREDICATE_OP_NONZERO && plan.predicate != v1::PREDICATE_OP_NOT_NAN) {
      SetScalar(o.predicate.mutable_threshold(), lo);
    }
    if (plan.predicate == v1::PREDICATE_OP_IN_RANGE) SetScalar(o.predicate.mutable_upper(), hi);
  }
  CompactResult<T> r;
  if (plan.transport == Transport::kShm) {
    const uint64_t n = x.size(), bytes = n * sizeof(T);
    const bool want_values = plan.output != v1::COMPACT_OUTPUT_INDICES;
    const bool want_indices = plan.output != v1::COMPACT_OUTPUT_VALUES;
    SharedRegion in = pool->Take(bytes), flags, values, indices;
    std::memcpy(in.data(), x.data(), bytes);
    if (plan.use_flags) {
      flags = pool->Take(n);
      std::memcpy(flags.data(), o.flags.data(), n);
    }
    if (want_values) values = pool->Take(bytes);  // room for every element kept
    if (want_indices) indices = pool->Take(n * sizeof(int64_t));
    v1::CompactHeader h;
    h.set_dtype(plan.dtype);
    if (plan.use_flags) {
      h.set_use_flags(true);
    } else {
      *h.mutable_predicate() = o.predicate;
    }
    h.set_output(plan.output);
    const v1::CompactResponse resp = client.CompactShared(h, in, bytes, plan.use_flags ? &flags : nullptr,
                                                          want_values ? &values : nullptr,
                                                          want_indices ? &indices : nullptr);
    r.kept_count = resp.kept_count();
    const uint64_t kept = std::min<uint64_t>(r.kept_count, n);
    if (want_values) r.values.assign(values.as<T>(), values.as<T>() + kept);
    if (want_indices) r.indices.assign(indices.as<int64_t>(), indices.as<int64_t>() + kept);
    if (resp.element_count() != n) {
      out.rpc_ok = true;
      out.error = "element_count " + std::to_string(resp.element_count()) + ", expected " + std::to_string(n);
      return;
    }
    for (SharedRegion* region : {&in, &flags, &values, &indices}) {
      if (region->data()) pool->Give(std::move(*region));
    }
  } else {
    r = client.Compact(x, o);
  }
  out.rpc_ok = true;
  out.bytes_out = r.values.size() * sizeof(T) + r.indices.size() * sizeof(int64_t);
  out.correct = CheckCompact(x, o.flags, plan, lo, hi, r, &out.error);
}

template <class T, class Op, class K>
void RunSegmentedScanKeys(Client& client, const Plan& plan, std::mt19937_64& rng, Outcome& out) {
  const std::vector<T> x = testing::RandomInput<T, Op>(plan.elements, rng);
  const std::vector<K> keys = SegmentKeys<K>(plan, rng);
  SegmentedScanOptions o;
  o.op = plan.op;
  o.exclusive = plan.exclusive;
  const ScanResult<T> r = client.SegmentedScan(x, keys, o);
  out.rpc_ok = true;
  out.bytes_out = r.values.size() * sizeof(T);
  out.correct = CheckSegmentedScan<T, Op>(x, testing::HeadsOfKeys(keys), r.values, plan.exclusive, &out.error);
}

template <class T, class Op>
void RunSegmentedScanHeads(Client& client, const Plan& plan, std::mt19937_64& rng, Outcome& out) {
  const std::vector<T> x = testing::RandomInput<T, Op>(plan.elements, rng);
  // Heads at about one element in mean_run, any nonzero byte (element 0's may be 0 or not).
  std::vector<uint8_t> heads = testing::RandomFlags(plan.elements, rng, 1.0 / double(plan.mean_run));
  SegmentedScanOptions o;
  o.op = plan.op;
  o.exclusive = plan.exclusive;
  const ScanResult<T> r = client.SegmentedScanHeads(x.data(), x.size(), heads.data(), o);
  out.rpc_ok = true;
  out.bytes_out = r.values.size() * sizeof(T);
  out.correct = CheckSegmentedScan<T, Op>(x, heads, r.values, plan.exclusive, &out.error);
}

template <class T, class Op, class K>
void RunReduceByKey(Client& client, const Plan& plan, std::mt19937_64& rng, Outcome& out) {
  const std::vector<T> x = testing::RandomInput<T, Op>(plan.elements, rng);
  const std::vector<K> keys = SegmentKeys<K>(plan, rng);
  const ReduceByKeyResult<T, K> r = client.ReduceByKey(x, keys, plan.op);
  out.rpc_ok = true;
  out.bytes_out = r.keys.size() * sizeof(K) + r.values.size() * sizeof(T);
  // One (first key, op over the run in order) per run of equal consecutive keys.
  const Op op;
  size_t run = 0;
  for (size_t i = 0; i < x.size();) {
    size_t j = i + 1;
    T acc = x[i];
    double abs_sum = std::fabs(double(x[i]));
    while (j < x.size() && keys[j] == keys[i]) {
      acc = op(acc, x[j]);
      abs_sum += std::fabs(double(x[j]));
      ++j;
    }
    if (run >= r.keys.size() || run >= r.values.size()) {
      out.error = "run " + std::to_string(run) + " (elements " + std::to_string(i) + ".." + std::to_string(j - 1) +
                  ") missing: got " + std::to_string(r.keys.size()) + " runs";
      return;
    }
    if (r.keys[run] != keys[i]) {
      out.error = Mismatch("key of run", run, r.keys[run], keys[i]);
      return;
    }
    if (!testing::WithinTolerance<T, Op>(r.values[run], acc, abs_sum, double(j - i))) {
      out.error = Mismatch("value of run", run, r.values[run], acc);
      return;
    }
    ++run;
    i = j;
  }
  if (r.keys.size() != run || r.values.size() != run) {
    out.error = "got " + std::to_string(r.keys.size()) + " runs, expected " + std::to_string(run);
    return;
  }
  out.correct = true;
}

// Sort (keys), SortPairs (keys and values V) or Argsort, checked against StablePermutation.
template <class T, class V>
void RunSort(Client& client, const Plan& plan, std::mt19937_64& rng, Outcome& out) {
  const std::vector<T> keys = SortKeys<T>(plan.elements, rng);
  std::vector<V> values;
  SortResult<T, V> r;
  if (plan.operation == Operation::kSortPairs) {
    values = testing::RandomInput<V, ops::Sum<V>>(plan.elements, rng);
    r = client.SortPairs(keys.data(), values.data(), keys.size(), plan.descending);
  } else if (plan.operation == Operation::kArgsort) {
    SortResult<T> a = client.Argsort(keys.data(), keys.size(), plan.descending);
    r.keys = std::move(a.keys);
    r.indices = std::move(a.indices);
  } else {
    SortResult<T> s = client.Sort(keys.data(), keys.size(), plan.descending);
    r.keys = std::move(s.keys);
  }
  out.rpc_ok = true;
  out.bytes_out = r.keys.size() * sizeof(T) + r.values.size() * sizeof(V) + r.indices.size() * sizeof(int64_t);
  const std::vector<int64_t> perm = StablePermutation(keys, plan.descending);
  const size_t n = keys.size();
  const bool want_keys = plan.operation != Operation::kArgsort;
  const bool want_values = plan.operation == Operation::kSortPairs;
  const bool want_indices = plan.operation == Operation::kArgsort;
  if ((want_keys ? r.keys.size() != n : !r.keys.empty()) || (want_values ? r.values.size() != n : !r.values.empty()) ||
      (want_indices ? r.indices.size() != n : !r.indices.empty())) {
    out.error = "got " + std::to_string(r.keys.size()) + " keys, " + std::to_string(r.values.size()) + " values, " +
                std::to_string(r.indices.size()) + " indices for " + std::to_string(n) + " elements";
    return;
  }
  for (size_t i = 0; i < n; ++i) {
    const auto p = static_cast<size_t>(perm[i]);
    if (want_keys && !testing::SameBits(r.keys[i], keys[p])) {
      out.error = Mismatch("sorted key", i, r.keys[i], keys[p]);
      return;
    }
    if (want_values && !testing::SameBits(r.values[i], values[p])) {
      out.error = Mismatch("value moved to", i, r.values[i], values[p]);
      return;
    }
    if (want_indices && r.indices[i] != perm[i]) {
      out.error = Mismatch("index", i, r.indices[i], perm[i]);
      return;
    }
  }
  out.correct = true;
}

// Even bins over a random [lo, hi] inside [-100, 100], or 2..1025 explicit edges (some
// repeated) over [-110, 110]; input from testing::HistogramInput (edges themselves, values a few
// ulps off them, values outside the range, NaN and +-inf for floats).
template <class T>
void RunHistogram(Client& client, const Plan& plan, std::mt19937_64& rng, Outcome& out) {
  HistogramBins bins;
  std::vector<double> edges;  // the edges the counts must use
  if (plan.explicit_edges) {
    edges.resize(plan.bins + 1);
    for (double& e : edges) e = std::uniform_real_distribution<double>(-110, 110)(rng);
    std::sort(edges.begin(), edges.end());
    for (size_t i = 1; i < edges.size(); ++i) {
      if (rng() % 8 == 0) edges[i] = edges[i - 1];
    }
    bins.bins = 0;
    bins.edges = edges;
  } else {
    bins.bins = plan.bins;
    bins.lo = std::uniform_real_distribution<double>(-100, 90)(rng);
    bins.hi = std::uniform_real_distribution<double>(bins.lo + 0.5, 100)(rng);
    // numpy.linspace's arithmetic in float64, the last edge hi itself; rounded to float32 for a
    // float32 array (whose elements then compare in float32).
    const double step = (bins.hi - bins.lo) / double(bins.bins);
    edges.resize(bins.bins + 1);
    for (uint32_t i = 0; i < bins.bins; ++i) edges[i] = double(i) * step + bins.lo;
    edges[bins.bins] = bins.hi;
    if (plan.dtype == v1::DTYPE_FLOAT32) {
      for (double& e : edges) e = double(float(e));
    }
  }
  const std::vector<T> x = testing::HistogramInput<T>(plan.elements, edges, rng);
  const HistogramResult r = client.Histogram(x, bins);
  out.rpc_ok = true;
  out.bytes_out = r.counts.size() * sizeof(uint64_t) + r.edges.size() * sizeof(double);
  const size_t nb = edges.size() - 1;
  const std::vector<uint64_t> ref = testing::HistogramRef(x, edges);
  if (!plan.explicit_edges && !testing::SameBits(r.edges, edges)) {
    out.error = "edges differ: got " + std::to_string(r.edges.size()) + " edges, expected " +
                std::to_string(edges.size());
    for (size_t i = 0; i < std::min(r.edges.size(), edges.size()); ++i) {
      if (!testing::SameBits(r.edges[i], edges[i])) {
        out.error = Mismatch("edge", i, r.edges[i], edges[i]);
        break;
      }
    }
    return;
  }
  if (r.counts.size() != nb) {
    out.error = "got " + std::to_string(r.counts.size()) + " bins, expected " + std::to_string(nb);
    return;
  }
  for (size_t i = 0; i < nb; ++i) {
    if (r.counts[i] != ref[i]) {
      out.error = Mismatch("count of bin", i, r.counts[i], ref[i]);
      return;
    }
  }
  if (r.below != ref[nb] || r.above != ref[nb + 1] || r.nan_count != ref[nb + 2] || r.element_count != x.size()) {
    out.error = "below/above/nan/elements " + std::to_string(r.below) + "/" + std::to_string(r.above) + "/" +
                std::to_string(r.nan_count) + "/" + std::to_string(r.element_count) + ", expected " +
                std::to_string(ref[nb]) + "/" + std::to_string(ref[nb + 1]) + "/" + std::to_string(ref[nb + 2]) +
                "/" + std::to_string(x.size());
    return;
  }
  out.correct = true;
}

// The summed-area table of a rows x cols matrix, checked row by row against the definition
// (testing::Scan2DRef's loop: rows folded left to right, then columns top to bottom, no
// identity folded in), exactly: the association is fixed, so the bits are too.
template <class T, class Op>
void RunScan2D(Client& client, const Plan& plan, std::mt19937_64& rng, Outcome& out) {
  const std::vector<T> x = testing::RandomInput<T, Op>(plan.elements, rng);
  const size_t cols = plan.cols, rows = x.size() / cols;
  const ScanResult<T> r = client.Scan2D(x.data(), rows, cols, plan.op);
  out.rpc_ok = true;
  out.bytes_out = r.values.size() * sizeof(T);
  if (r.values.size() != x.size()) {
    out.error = "got " + std::to_string(r.values.size()) + " elements, expected " + std::to_string(x.size());
    return;
  }
  const Op op;
  std::vector<T> above(cols);
  for (size_t i = 0; i < rows; ++i) {
    T acc = x[i * cols];
    for (size_t j = 0; j < cols; ++j) {
      if (j) acc = op(acc, x[i * cols + j]);
      const T ref = i ? op(above[j], acc) : acc;
      if (!testing::SameValue(r.values[i * cols + j], ref)) {
        out.error = "row " + std::to_string(i) + " col " + std::to_string(j) + ": got " +
                    testing::Show(r.values[i * cols + j]) + ", expected " + testing::Show(ref);
        return;
      }
      above[j] = ref;
    }
  }
  out.correct = true;
}

}  // namespace

void RunCall(Client& client, const Plan& plan, std::mt19937_64& rng, RegionPool* pool, Outcome& out) {
  WithType(plan.dtype, [&](auto t) {
    using T = typename decltype(t)::type;
    switch (plan.operation) {
      case Operation::kScan:
        WithOp<T>(plan.op, [&](auto o) { RunScan<T, typename decltype(o)::type>(client, plan, rng, pool, out); });
        break;
      case Operation::kReduce:
        WithOp<T>(plan.op, [&](auto o) { RunReduce<T, typename decltype(o)::type>(client, plan, rng, pool, out); });
        break;
      case Operation::kCompact:
        RunCompact<T>(client, plan, rng, pool, out);
        break;
      case Operation::kSegmentedScanKeys:
        WithOp<T>(plan.op, [&](auto o) {
          WithKeyType(plan.key_dtype, [&](auto k) {
            RunSegmentedScanKeys<T, typename decltype(o)::type, typename decltype(k)::type>(client, plan, rng, out);
          });
        });
        break;
      case Operation::kSegmentedScanHeads:
        WithOp<T>(plan.op,
                  [&](auto o) { RunSegmentedScanHeads<T, typename decltype(o)::type>(client, plan, rng, out); });
        break;
      case Operation::kReduceByKey:
        WithOp<T>(plan.op, [&](auto o) {
          WithKeyType(plan.key_dtype, [&](auto k) {
            RunReduceByKey<T, typename decltype(o)::type, typename decltype(k)::type>(client, plan, rng, out);
          });
        });
        break;
      case Operation::kSort:
      case Operation::kArgsort:
        RunSort<T, T>(client, plan, rng, out);
        break;
      case Operation::kSortPairs:
        WithType(plan.values_dtype, [&](auto v) { RunSort<T, typename decltype(v)::type>(client, plan, rng, out); });
        break;
      case Operation::kHistogram:
        RunHistogram<T>(client, plan, rng, out);
        break;
      case Operation::kScan2D:
        WithOp<T>(plan.op, [&](auto o) { RunScan2D<T, typename decltype(o)::type>(client, plan, rng, out); });
        break;
    }
  });
}

}  // namespace gpuscan::soak
