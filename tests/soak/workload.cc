#include "workload.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>
#include <type_traits>
#include <vector>

#include "reference.h"

namespace gpuscan::soak {
namespace {

template <class T>
struct Type {
  using type = T;
};

size_t SizeOf(v1::DType d) { return DTypeSize(d); }
bool IsFloat(v1::DType d) { return d == v1::DTYPE_FLOAT32 || d == v1::DTYPE_FLOAT64; }

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

std::string Lower(std::string s, size_t prefix) {
  s = s.substr(prefix);
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
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

// ---- checks (on the fly: no reference arrays, so a 64 MiB call costs no extra memory)

template <class T, class Op>
bool CheckScan(const std::vector<T>& x, const std::vector<T>& got, bool exclusive, std::string* why) {
  if (got.size() != x.size()) {
    *why = "got " + std::to_string(got.size()) + " elements, expected " + std::to_string(x.size());
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
        *why = "element " + std::to_string(i) + ": got " + testing::Show(got[i]) + ", expected " + testing::Show(ref);
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
        *why = "element " + std::to_string(i) + ": got " + testing::Show(got[i]) + ", expected " + testing::Show(ref);
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

template <class T, class Op>
void RunScan(Client& client, const Plan& plan, std::mt19937_64& rng, Outcome& out) {
  const std::vector<T> x = testing::RandomInput<T, Op>(plan.elements, rng);
  ScanOptions o;
  o.op = plan.op;
  o.exclusive = plan.exclusive;
  const ScanResult<T> r = client.Scan(x, o);
  out.rpc_ok = true;
  out.bytes_out = r.values.size() * sizeof(T);
  out.correct = CheckScan<T, Op>(x, r.values, plan.exclusive, &out.error);
}

template <class T, class Op>
void RunReduce(Client& client, const Plan& plan, std::mt19937_64& rng, Outcome& out) {
  const std::vector<T> x = testing::RandomInput<T, Op>(plan.elements, rng);
  const ReduceResult<T> r = client.Reduce(x, plan.op);
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
void RunCompact(Client& client, const Plan& plan, std::mt19937_64& rng, Outcome& out) {
  const std::vector<T> x = testing::RandomCompactInput<T>(plan.elements, rng, IsFloat(plan.dtype) ? 0.01 : 0.0);
  CompactOptions o;
  o.output = plan.output;
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
  const CompactResult<T> r = client.Compact(x, o);
  out.rpc_ok = true;
  out.bytes_out = r.values.size() * sizeof(T) + r.indices.size() * sizeof(int64_t);
  out.correct = CheckCompact(x, o.flags, plan, lo, hi, r, &out.error);
}

}  // namespace

const char* Name(Operation op) {
  switch (op) {
    case Operation::kScan: return "scan";
    case Operation::kReduce: return "reduce";
    case Operation::kCompact: return "compact";
  }
  return "?";
}

std::string Plan::Describe() const {
  std::ostringstream s;
  s << Name(operation) << " " << Lower(v1::DType_Name(dtype), 6);
  if (operation == Operation::kCompact) {
    s << " " << (use_flags ? std::string("flags") : Lower(v1::PredicateOp_Name(predicate), 13)) << " "
      << Lower(v1::CompactOutput_Name(output), 15);
  } else {
    s << " " << Lower(v1::Operator_Name(op), 9);
    if (operation == Operation::kScan) s << (exclusive ? " exclusive" : " inclusive");
  }
  s << " n=" << elements;
  return s.str();
}

uint64_t Plan::InputBytes() const {
  return elements * SizeOf(dtype) + (operation == Operation::kCompact && use_flags ? elements : 0);
}

uint64_t Plan::ClientBytes() const {
  const uint64_t values = elements * SizeOf(dtype);
  switch (operation) {
    case Operation::kScan: return 2 * values;
    case Operation::kReduce: return values;
    case Operation::kCompact: return 2 * values + elements * (1 + sizeof(int64_t));
  }
  return values;
}

Workload::Workload(uint64_t max_bytes, uint64_t client_chunk_bytes)
    : max_bytes_(max_bytes), client_chunk_bytes_(client_chunk_bytes) {}

uint64_t Workload::Size(v1::DType dtype, std::mt19937_64& rng) const {
  const uint64_t size = SizeOf(dtype);
  const uint64_t max_elems = std::max<uint64_t>(1, max_bytes_ / size);
  if (rng() % 4 != 0) {  // log-uniform in bytes, one element to the largest request
    const double lo = std::log(double(size)), hi = std::log(double(max_elems * size));
    const double bytes = std::exp(std::uniform_real_distribution<double>(lo, hi)(rng));
    return std::clamp<uint64_t>(uint64_t(bytes) / size, 1, max_elems);
  }
  // Boundaries, +-1: warps, the CUDA tiles (4 Ki / 2 Ki elements for 4- / 8-byte types), the CPU
  // engine's blocks (16 Ki) and its parallel threshold (64 Ki), the CUDA engine's 2 MiB
  // sub-chunks, the client's chunks and the server's 4 MiB chunk limit.
  const uint64_t centres[] = {2,
                              32,
                              2048,
                              4096,
                              uint64_t{1} << 14,
                              uint64_t{1} << 16,
                              (uint64_t{2} << 20) / size,
                              client_chunk_bytes_ / size,
                              2 * client_chunk_bytes_ / size,
                              (uint64_t{4} << 20) / size};
  const uint64_t c = centres[rng() % std::size(centres)];
  const uint64_t n = c - 1 + rng() % 3;
  return std::clamp<uint64_t>(n, 1, max_elems);
}

Plan Workload::Draw(std::mt19937_64& rng) const {
  static constexpr v1::DType kDTypes[] = {v1::DTYPE_INT32, v1::DTYPE_INT64,   v1::DTYPE_UINT32,
                                          v1::DTYPE_UINT64, v1::DTYPE_FLOAT32, v1::DTYPE_FLOAT64};
  Plan p;
  p.operation = static_cast<Operation>(rng() % kOperations);
  p.dtype = kDTypes[rng() % std::size(kDTypes)];
  const int ops = IsFloat(p.dtype) ? 4 : 7;
  p.op = static_cast<v1::Operator>(v1::OPERATOR_SUM + int(rng() % ops));
  p.exclusive = rng() & 1;
  p.use_flags = rng() & 1;
  p.predicate = static_cast<v1::PredicateOp>(v1::PREDICATE_OP_NONZERO + int(rng() % 9));
  p.output = static_cast<v1::CompactOutput>(rng() % 3);
  p.elements = Size(p.dtype, rng);
  return p;
}

Outcome Workload::Run(Client& client, const Plan& plan, std::mt19937_64& rng) const {
  Outcome out;
  out.bytes_in = plan.InputBytes();
  try {
    WithType(plan.dtype, [&](auto t) {
      using T = typename decltype(t)::type;
      switch (plan.operation) {
        case Operation::kScan:
          WithOp<T>(plan.op, [&](auto o) { RunScan<T, typename decltype(o)::type>(client, plan, rng, out); });
          break;
        case Operation::kReduce:
          WithOp<T>(plan.op, [&](auto o) { RunReduce<T, typename decltype(o)::type>(client, plan, rng, out); });
          break;
        case Operation::kCompact:
          RunCompact<T>(client, plan, rng, out);
          break;
      }
    });
  } catch (const RpcError& e) {
    out.rpc_ok = false;
    out.error = StatusCodeName(e.code()) + ": " + e.message();
  } catch (const std::exception& e) {
    out.rpc_ok = false;
    out.error = std::string("client error: ") + e.what();
  }
  return out;
}

Outcome Workload::RunStreamingScan(Client& client, uint64_t bytes, uint64_t seed) const {
  Outcome out;
  const uint64_t n = bytes / sizeof(int64_t);
  out.bytes_in = n * sizeof(int64_t);
  // Both ends draw the same sequence: the source to send, the sink to check against.
  std::mt19937_64 send_rng(seed), check_rng(seed);
  auto draw = [](std::mt19937_64& r) { return static_cast<int64_t>(r() | 1); };  // never zero
  uint64_t sent = 0, checked = 0;
  uint64_t acc = 0;  // int64 sum wraps: add in the unsigned type
  bool wrong = false;
  try {
    v1::ScanHeader h;
    h.set_dtype(v1::DTYPE_INT64);
    h.set_op(v1::OPERATOR_SUM);
    h.set_element_count(n);
    client.ScanStream(
        h,
        [&](void* buf, size_t max_bytes) -> size_t {
          const uint64_t k = std::min<uint64_t>(n - sent, max_bytes / sizeof(int64_t));
          auto* p = static_cast<unsigned char*>(buf);
          for (uint64_t i = 0; i < k; ++i) {
            const int64_t v = draw(send_rng);
            std::memcpy(p + i * sizeof(int64_t), &v, sizeof(v));
          }
          sent += k;
          return k * sizeof(int64_t);
        },
        [&](const void* data, size_t size) {
          const auto* p = static_cast<const unsigned char*>(data);
          for (size_t i = 0; i + sizeof(int64_t) <= size; i += sizeof(int64_t)) {
            acc += static_cast<uint64_t>(draw(check_rng));
            int64_t got;
            std::memcpy(&got, p + i, sizeof(got));
            if (!wrong && got != static_cast<int64_t>(acc)) {
              wrong = true;
              out.error = "element " + std::to_string(checked) + ": got " + std::to_string(got) + ", expected " +
                          std::to_string(static_cast<int64_t>(acc));
            }
            ++checked;
          }
        });
    out.rpc_ok = true;
    out.bytes_out = checked * sizeof(int64_t);
    if (!wrong && checked != n) out.error = "got " + std::to_string(checked) + " elements, expected " + std::to_string(n);
    out.correct = !wrong && checked == n;
  } catch (const RpcError& e) {
    out.error = StatusCodeName(e.code()) + ": " + e.message();
  } catch (const std::exception& e) {
    out.error = std::string("client error: ") + e.what();
  }
  return out;
}

}  // namespace gpuscan::soak
