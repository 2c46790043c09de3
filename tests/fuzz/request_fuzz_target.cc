// The request fuzzer's target: one call's header and chunks through the handlers' checks and
// chunk assembly, then the CPU engine against the reference (sequential, or the canonical tree for
// deterministic sessions). Format and invariants: request_fuzz_target.h.
#include "request_fuzz_target.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "engine/cpu_engine.h"
#include "canonical_reference.h"
#include "engine/dispatch.h"
#include "gpuscan/v1/gpuscan.pb.h"
#include "reference.h"
#include "service/flags_aligner.h"
#include "service/row_cutter.h"
#include "service/validate.h"

namespace gpuscan::fuzz {
namespace {

constexpr size_t kMaxRequests = 64;
constexpr uint32_t kFuzzMaxBins = 4096;
constexpr uint64_t kFuzzMaxRowBytes = 4096;  // Scan2D: small, so refused rows are reachable
constexpr uint64_t kMaxRequestBytesChoices[] = {0, 64, 512, 4096};

struct Request {
  bool has_header = false;
  std::string header, data, flags;
};

// How a call ended: its status, and the elements the engine was given.
struct Result {
  grpc::Status status;
  uint64_t elements = 0;
};

// Reads the input front to back; past the end every read gives zeros / nothing.
class Reader {
 public:
  Reader(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  bool done() const { return pos_ >= size_; }
  uint8_t U8() { return pos_ < size_ ? data_[pos_++] : 0; }
  uint16_t U16() {
    const uint16_t lo = U8();
    return static_cast<uint16_t>(lo | (uint16_t(U8()) << 8));
  }
  std::string Bytes(size_t n) {
    n = std::min(n, size_ - std::min(pos_, size_));
    std::string s(reinterpret_cast<const char*>(data_ + pos_), n);
    pos_ += n;
    return s;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

[[noreturn]] void Fail(const std::string& why) {
  std::fprintf(stderr, "request fuzzer: invariant violated: %s\n", why.c_str());
  std::fflush(stderr);
  std::abort();
}

// One engine for every input: one thread (inputs are small), as the server would build it.
engine::CpuEngine& Engine() {
  static engine::CpuEngine* e = new engine::CpuEngine(1);  // never destroyed: no exit-order issues
  return *e;
}

// A rejected call: one of the codes validation may give, and a message naming a field.
void CheckRejected(const grpc::Status& s) {
  const auto code = s.error_code();
  if (code != grpc::StatusCode::INVALID_ARGUMENT && code != grpc::StatusCode::RESOURCE_EXHAUSTED &&
      code != grpc::StatusCode::UNIMPLEMENTED) {
    Fail("rejected with unexpected code " + std::to_string(int(code)) + ": " + s.error_message());
  }
  const std::string& m = s.error_message();
  if (m.empty()) Fail("rejected with an empty message (code " + std::to_string(int(code)) + ")");
  static const char* const kFields[] = {"header", "request #", "flags", "--max-request-bytes", "empty stream"};
  if (std::none_of(std::begin(kFields), std::end(kFields), [&](const char* f) { return m.find(f) != std::string::npos; })) {
    Fail("the message names no field: " + m);
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

// A copy of `bytes` starting one byte past an aligned address: the engine takes raw bytes at
// any alignment (protobuf strings guarantee none), so the fuzzer never hands it aligned ones.
struct Unaligned {
  explicit Unaligned(const void* src, size_t n, unsigned char fill = 0) : buf(n + 1, fill) {
    if (src && n) std::memcpy(buf.data() + 1, src, n);
  }
  unsigned char* data() { return buf.data() + 1; }
  std::vector<unsigned char> buf;
};

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

// ---------------------------------------------------------------------------------------------
// Scan

void RunScanEngine(const engine::ScanSpec& spec, const std::vector<const std::string*>& chunks) {
  engine::Visit(spec.dtype, spec.op, [&](auto t, auto o) {
    using T = typename decltype(t)::type;
    using Op = typename decltype(o)::type;
    std::unique_ptr<engine::ScanSession> session;
    try {
      session = Engine().NewScan(spec);
    } catch (const std::exception& e) {
      Fail(std::string("a validated Scan header made the engine throw: ") + e.what());
    }
    engine::StageTimes times;
    std::vector<T> x, got;
    for (const std::string* chunk : chunks) {
      const uint64_t n = chunk->size() / sizeof(T);
      if (n == 0) continue;  // as the handler: an empty chunk never reaches the engine
      Unaligned in(chunk->data(), chunk->size());
      Unaligned out(nullptr, chunk->size(), 0xA5);  // poisoned: unwritten elements show
      session->Process(in.data(), out.data(), n, times);
      const std::vector<T> xs = Elements<T>(*chunk);
      x.insert(x.end(), xs.begin(), xs.end());
      const std::vector<T> ys = Elements<T>(std::string(reinterpret_cast<const char*>(out.data()), chunk->size()));
      got.insert(got.end(), ys.begin(), ys.end());
    }
    // The deterministic algorithm (the default for float SUM/PRODUCT) associates by global
    // element position, so it is held to the canonical tree; every other algorithm to the
    // sequential fold (the two agree wherever association cannot change the bits).
    const bool canonical = session->algorithm() == "deterministic";
    ExpectSame(got, canonical ? testing::CanonicalScanRef<T, Op>(x, spec.exclusive) : testing::ScanRef<T, Op>(x, spec.exclusive),
               std::string("scan ") + std::string(engine::Name(spec.op)) + " " + std::string(engine::Name(spec.dtype)) +
                   (spec.exclusive ? " exclusive" : " inclusive"));
  });
}

// One call whose requests carry a header and `data` chunks (Scan, Reduce, Histogram): the
// server's checks in order; to_spec(header, spec) is the RPC's header check; then the engine
// runs on whatever was accepted, as the server would have before (or without) failing.
template <class Header, class Spec, class ToSpec, class Run>
Result FuzzDataCall(const std::vector<Request>& requests, uint64_t chunk_bytes, uint64_t max_request_bytes,
                    ToSpec to_spec, Run run) {
  grpc::Status st = requests.empty() ? server::EmptyStreamStatus() : grpc::Status::OK;
  Spec spec;
  std::optional<server::ChunkChecker> checker;
  std::vector<const std::string*> accepted;
  for (uint64_t i = 0; st.ok() && i < requests.size(); ++i) {
    const Request& r = requests[i];
    st = server::CheckHeaderPlacement(i, r.has_header);
    if (st.ok() && i == 0) {
      const auto h = ParseHeader<Header>(r.header);
      st = to_spec(h, &spec);
      if (st.ok()) checker.emplace(spec.dtype, DeclaredCount(h), chunk_bytes, max_request_bytes);
    }
    if (st.ok()) st = checker->Add(r.data.size(), "data", i);
    if (st.ok()) accepted.push_back(&r.data);
  }
  if (st.ok()) st = checker->Finish();
  if (!st.ok()) CheckRejected(st);
  if (checker) run(spec, accepted);
  return {st, checker ? checker->elements() : 0};
}

Result FuzzScan(const std::vector<Request>& requests, uint64_t chunk_bytes, uint64_t max_request_bytes) {
  return FuzzDataCall<v1::ScanHeader, engine::ScanSpec>(
      requests, chunk_bytes, max_request_bytes,
      [](const v1::ScanHeader& h, engine::ScanSpec* spec) {
        grpc::Status st = server::ToEngine(h, spec);
        if (st.ok()) st = server::CheckScanAlgorithm(spec->algorithm, Engine().scan_algorithms(), Engine().name());
        return st;
      },
      RunScanEngine);
}

// ---------------------------------------------------------------------------------------------
// Reduce

void RunReduceEngine(const engine::ReduceSpec& spec, const std::vector<const std::string*>& chunks) {
  engine::Visit(spec.dtype, spec.op, [&](auto t, auto o) {
    using T = typename decltype(t)::type;
    using Op = typename decltype(o)::type;
    std::unique_ptr<engine::ReduceSession> session;
    try {
      session = Engine().NewReduce(spec);
    } catch (const std::exception& e) {
      Fail(std::string("a validated Reduce header made the engine throw: ") + e.what());
    }
    engine::StageTimes times;
    std::vector<T> x;
    int scaled = 0;
    for (const std::string* chunk : chunks) {
      std::vector<T> xs = Elements<T>(*chunk);
      if (xs.empty()) continue;
      TameForReduce<T, Op>(xs, scaled);
      Unaligned in(xs.data(), xs.size() * sizeof(T));
      session->Process(in.data(), xs.size(), times);
      x.insert(x.end(), xs.begin(), xs.end());
    }
    T got;
    session->Result(&got);
    const T want = session->algorithm() == "deterministic" ? testing::CanonicalReduceRef<T, Op>(x) : testing::ReduceRef<T, Op>(x);
    ExpectSame(std::vector<T>{got}, std::vector<T>{want},
               "reduce " + std::string(engine::Name(spec.op)) + " " + std::string(engine::Name(spec.dtype)) + " of " +
                   std::to_string(x.size()) + " elements");
  });
}

Result FuzzReduce(const std::vector<Request>& requests, uint64_t chunk_bytes, uint64_t max_request_bytes) {
  return FuzzDataCall<v1::ReduceHeader, engine::ReduceSpec>(
      requests, chunk_bytes, max_request_bytes,
      [](const v1::ReduceHeader& h, engine::ReduceSpec* spec) { return server::ToEngine(h, spec); }, RunReduceEngine);
}

// ---------------------------------------------------------------------------------------------
// Compact

void RunCompactEngine(const engine::CompactSpec& spec, const std::vector<const Request*>& requests) {
  engine::VisitDType(spec.dtype, [&](auto t) {
    using T = typename decltype(t)::type;
    std::unique_ptr<engine::CompactSession> session;
    try {
      session = Engine().NewCompact(spec);
    } catch (const std::exception& e) {
      Fail(std::string("a validated Compact header made the engine throw: ") + e.what());
    }
    engine::StageTimes times;
    std::vector<T> given, kept;             // values handed to the engine; kept values
    std::vector<uint8_t> given_flags;       // flags handed to the engine (use_flags)
    std::vector<int64_t> kept_indices;
    // The handler's Select: one engine call on n elements, outputs sized for all n.
    auto select = [&](const char* values, const uint8_t* flags, uint64_t n) {
      if (n == 0) return;
      Unaligned in(values, n * sizeof(T));
      Unaligned out_values(nullptr, n * sizeof(T), 0xA5);
      std::vector<int64_t> out_indices(n, -7);
      const uint64_t k = session->Process(in.data(), flags, n, spec.want_values ? out_values.data() : nullptr,
                                          spec.want_indices ? out_indices.data() : nullptr, times);
      if (k > n) Fail("compact kept " + std::to_string(k) + " of " + std::to_string(n) + " elements");
      const std::vector<T> xs = Elements<T>(std::string(values, n * sizeof(T)));
      given.insert(given.end(), xs.begin(), xs.end());
      if (flags) given_flags.insert(given_flags.end(), flags, flags + n);
      if (spec.want_values) {
        const auto ks = Elements<T>(std::string(reinterpret_cast<const char*>(out_values.data()), k * sizeof(T)));
        kept.insert(kept.end(), ks.begin(), ks.end());
      }
      if (spec.want_indices) kept_indices.insert(kept_indices.end(), out_indices.begin(), out_indices.begin() + k);
    };
    server::FlagsAligner aligner(sizeof(T));
    std::string all_values, all_flags;  // the streams as sent
    for (const Request* r : requests) {
      all_values += r->data;
      if (spec.use_flags) {
        all_flags += r->flags;
        aligner.Add(r->data, r->flags, select);
      } else {
        select(r->data.data(), nullptr, r->data.size() / sizeof(T));
      }
    }
    // Chunk assembly: the engine got the streams' common prefix, in order, and nothing else.
    const std::vector<T> sent = Elements<T>(all_values);
    if (spec.use_flags) {
      const size_t common = std::min<size_t>(sent.size(), all_flags.size());
      if (given.size() != common) {
        Fail("flags aligner passed " + std::to_string(given.size()) + " elements, expected " + std::to_string(common));
      }
      if (given_flags.size() != given.size() ||
          (common && std::memcmp(given_flags.data(), all_flags.data(), common) != 0)) {
        Fail("flags aligner passed flags out of order");
      }
      if (aligner.values_waiting() != sent.size() - common || aligner.flags_waiting() != all_flags.size() - common) {
        Fail("flags aligner holds the wrong backlog");
      }
    }
    if (given.size() > sent.size() ||
        (!given.empty() && std::memcmp(given.data(), sent.data(), given.size() * sizeof(T)) != 0)) {
      Fail("the engine got values that differ from those sent");
    }
    testing::CompactResult<T> ref;
    if (spec.use_flags) {
      ref = testing::CompactRef(given, given_flags);
    } else {
      T threshold, upper;
      std::memcpy(&threshold, spec.predicate.threshold, sizeof(T));
      std::memcpy(&upper, spec.predicate.upper, sizeof(T));
      ref = testing::CompactRef(given, spec.predicate.op, threshold, upper);
    }
    const std::string what = "compact " + std::string(engine::Name(spec.dtype)) + " " +
                             (spec.use_flags ? std::string("flags") : std::string(engine::Name(spec.predicate.op)));
    if (spec.want_values) {
      if (kept.size() != ref.values.size() ||
          (!kept.empty() && std::memcmp(kept.data(), ref.values.data(), kept.size() * sizeof(T)) != 0)) {
        ExpectSame(kept, ref.values, what + " values");
        Fail(what + " values differ in their bits");
      }
    }
    if (spec.want_indices) ExpectSame(kept_indices, ref.indices, what + " indices");
  });
}

Result FuzzCompact(const std::vector<Request>& requests, uint64_t chunk_bytes, uint64_t max_request_bytes) {
  grpc::Status st = requests.empty() ? server::EmptyStreamStatus() : grpc::Status::OK;
  engine::CompactSpec spec;
  std::optional<server::PairedChecker> checker;
  std::vector<const Request*> accepted;
  for (uint64_t i = 0; st.ok() && i < requests.size(); ++i) {
    const Request& r = requests[i];
    st = server::CheckHeaderPlacement(i, r.has_header);
    if (st.ok() && i == 0) {
      const auto h = ParseHeader<v1::CompactHeader>(r.header);
      st = server::ToEngine(h, &spec);
      if (st.ok()) checker.emplace(spec.dtype, server::CompactSide(spec), DeclaredCount(h), chunk_bytes, max_request_bytes);
    }
    if (st.ok()) st = checker->Add(r.data.size(), r.flags.size(), i);
    if (st.ok()) accepted.push_back(&r);
  }
  if (st.ok()) st = checker->Finish();
  if (!st.ok()) CheckRejected(st);
  if (checker) RunCompactEngine(spec, accepted);
  return {st, checker ? checker->elements() : 0};
}

// ---------------------------------------------------------------------------------------------
// Histogram

void RunHistogramEngine(const engine::HistogramSpec& spec, const std::vector<const std::string*>& chunks) {
  engine::VisitDType(spec.dtype, [&](auto t) {
    using T = typename decltype(t)::type;
    std::unique_ptr<engine::HistogramSession> session;
    try {
      session = Engine().NewHistogram(spec);
    } catch (const std::exception& e) {
      Fail(std::string("a validated Histogram header made the engine throw: ") + e.what());
    }
    engine::StageTimes times;
    std::vector<T> x;
    for (const std::string* chunk : chunks) {
      std::vector<T> xs = Elements<T>(*chunk);
      if (xs.empty()) continue;
      Unaligned in(xs.data(), xs.size() * sizeof(T));
      session->Process(in.data(), xs.size(), times);
      x.insert(x.end(), xs.begin(), xs.end());
    }
    ExpectSame(session->Result(), testing::HistogramRef(x, spec.edges),
               "histogram " + std::string(engine::Name(spec.dtype)) + " of " + std::to_string(x.size()) +
                   " elements in " + std::to_string(spec.edges.size() - 1) + " bins");
  });
}

Result FuzzHistogram(const std::vector<Request>& requests, uint64_t chunk_bytes, uint64_t max_request_bytes) {
  // The fuzzer's bins stay small: the engine's counters cost O(bins) per call, and the limit
  // itself is the bad-input matrix's and the unit tests' business.
  return FuzzDataCall<v1::HistogramHeader, engine::HistogramSpec>(
      requests, chunk_bytes, max_request_bytes,
      [](const v1::HistogramHeader& h, engine::HistogramSpec* spec) { return server::ToEngine(h, kFuzzMaxBins, spec); },
      RunHistogramEngine);
}

// ---------------------------------------------------------------------------------------------
// Scan2D: the handler's checks (Scan2DChecker), its re-cutting into whole rows (RowCutter), and
// the CPU engine against Scan2DRef over the rows that completed.

void RunScan2DEngine(const engine::Scan2DSpec& spec, const std::vector<const std::string*>& chunks) {
  engine::Visit(spec.dtype, spec.op, [&](auto t, auto o) {
    using T = typename decltype(t)::type;
    using Op = typename decltype(o)::type;
    std::unique_ptr<engine::Scan2DSession> session;
    try {
      session = Engine().NewScan2D(spec);
    } catch (const std::exception& e) {
      Fail(std::string("a validated Scan2D header made the engine throw: ") + e.what());
    }
    engine::StageTimes times;
    std::string in_rows, out_rows;
    server::RowCutter cutter(spec.cols * sizeof(T));
    for (const std::string* chunk : chunks) {
      cutter.Add(*chunk, [&](const char* rows_data, uint64_t rows) {
        const size_t bytes = rows * spec.cols * sizeof(T);
        Unaligned in(rows_data, bytes);
        Unaligned out(nullptr, bytes, 0xA5);
        session->Process(in.data(), out.data(), rows, times);
        in_rows.append(rows_data, bytes);
        out_rows.append(reinterpret_cast<const char*>(out.data()), bytes);
      });
    }
    const std::vector<T> x = Elements<T>(in_rows);
    ExpectSame(Elements<T>(out_rows), testing::Scan2DRef<T, Op>(x, x.size() / spec.cols, spec.cols),
               "scan2d " + std::string(engine::Name(spec.op)) + " " + std::string(engine::Name(spec.dtype)) +
                   " cols=" + std::to_string(spec.cols));
  });
}

Result FuzzScan2D(const std::vector<Request>& requests, uint64_t chunk_bytes, uint64_t max_request_bytes) {
  grpc::Status st = requests.empty() ? server::EmptyStreamStatus() : grpc::Status::OK;
  engine::Scan2DSpec spec;
  std::optional<server::Scan2DChecker> checker;
  std::vector<const std::string*> accepted;
  for (uint64_t i = 0; st.ok() && i < requests.size(); ++i) {
    const Request& r = requests[i];
    st = server::CheckHeaderPlacement(i, r.has_header);
    if (st.ok() && i == 0) {
      const auto h = ParseHeader<v1::Scan2DHeader>(r.header);
      st = server::ToEngine(h, kFuzzMaxRowBytes, &spec);
      std::optional<uint64_t> rows;
      if (h.has_rows()) rows = h.rows();
      if (st.ok()) checker.emplace(spec, rows, chunk_bytes, max_request_bytes);
    }
    if (st.ok()) st = checker->Add(r.data.size(), i);
    if (st.ok()) accepted.push_back(&r.data);
  }
  if (st.ok()) st = checker->Finish();
  if (!st.ok()) CheckRejected(st);
  if (checker) RunScan2DEngine(spec, accepted);
  return {st, checker ? checker->elements() : 0};
}

}  // namespace

int RunRequestInput(const uint8_t* data, size_t size, std::string* outcome) {
  Reader in(data, size);
  const int rpc = in.U8() % 5;
  const uint8_t limits = in.U8();
  const uint64_t chunk_bytes = uint64_t{8} << (limits & 7);
  const uint64_t max_request_bytes = kMaxRequestBytesChoices[(limits >> 3) & 3];
  std::vector<Request> requests;
  while (!in.done() && requests.size() < kMaxRequests) {
    Request r;
    r.has_header = in.U8() & 1;
    if (r.has_header) r.header = in.Bytes(in.U8());
    r.data = in.Bytes(in.U16());
    if (rpc == 2) r.flags = in.Bytes(in.U16());
    requests.push_back(std::move(r));
  }
  Result r;
  switch (rpc) {
    case 0: r = FuzzScan(requests, chunk_bytes, max_request_bytes); break;
    case 1: r = FuzzReduce(requests, chunk_bytes, max_request_bytes); break;
    case 2: r = FuzzCompact(requests, chunk_bytes, max_request_bytes); break;
    case 3: r = FuzzHistogram(requests, chunk_bytes, max_request_bytes); break;
    default: r = FuzzScan2D(requests, chunk_bytes, max_request_bytes); break;
  }
  if (outcome) {
    static const char* const kRpc[] = {"scan", "reduce", "compact", "histogram", "scan2d"};
    *outcome = std::string(kRpc[rpc]) + ", " + std::to_string(requests.size()) + " requests: " +
               (r.status.ok() ? "accepted, " + std::to_string(r.elements) + " elements"
                              : "rejected, code " + std::to_string(int(r.status.error_code())) + ": " +
                                    r.status.error_message());
  }
  return 0;
}

std::string EncodeInput(int rpc, uint8_t limits, const std::vector<SeedRequest>& requests) {
  std::string out;
  out.push_back(static_cast<char>(rpc));
  out.push_back(static_cast<char>(limits));
  auto u16 = [&](size_t n) {
    out.push_back(static_cast<char>(n & 0xff));
    out.push_back(static_cast<char>((n >> 8) & 0xff));
  };
  for (const SeedRequest& r : requests) {
    out.push_back(r.has_header ? 1 : 0);
    if (r.has_header) {
      out.push_back(static_cast<char>(std::min<size_t>(r.header.size(), 255)));
      out += r.header.substr(0, 255);
    }
    u16(std::min<size_t>(r.data.size(), 0xffff));
    out += r.data.substr(0, 0xffff);
    if (rpc == 2) {
      u16(std::min<size_t>(r.flags.size(), 0xffff));
      out += r.flags.substr(0, 0xffff);
    }
  }
  return out;
}

}  // namespace gpuscan::fuzz
