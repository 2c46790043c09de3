// The request fuzzer's calls, one per RPC: the handler's checks in the handler's order, then the
// CPU engine on what was accepted, against the references (request_fuzz_target.h lists the
// invariants).
#include "request_fuzz_calls.h"
#include "request_fuzz_common.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "engine/cpu_engine.h"
#include "canonical_reference.h"
#include "engine/dispatch.h"
#include "engine/reduce_by_key.h"
#include "gpuscan/v1/gpuscan.pb.h"
#include "reference.h"
#include "service/flags_aligner.h"
#include "service/row_cutter.h"
#include "service/shared_memory.h"
#include "service/validate.h"

namespace gpuscan::fuzz {
namespace {

constexpr uint32_t kFuzzMaxBins = 4096;
constexpr uint64_t kFuzzMaxRowBytes = 4096;  // Scan2D: small, so refused rows are reachable

// A rejected call: one of the codes validation may give, and a message naming a field.
void CheckRejected(const grpc::Status& s) {
  const auto code = s.error_code();
  if (code != grpc::StatusCode::INVALID_ARGUMENT && code != grpc::StatusCode::RESOURCE_EXHAUSTED &&
      code != grpc::StatusCode::UNIMPLEMENTED) {
    Fail("rejected with unexpected code " + std::to_string(int(code)) + ": " + s.error_message());
  }
  const std::string& m = s.error_message();
  if (m.empty()) Fail("rejected with an empty message (code " + std::to_string(int(code)) + ")");
  // "keys" / "values": the end-of-stream count check of SegmentedScan, ReduceByKey and Sort names
  // the two streams ("keys length 3 differs from data length 4 ...").
  static const char* const kFields[] = {"header", "request #", "flags",       "keys",
                                        "values", "--max-request-bytes", "empty stream"};
  if (std::none_of(std::begin(kFields), std::end(kFields), [&](const char* f) { return m.find(f) != std::string::npos; })) {
    Fail("the message names no field: " + m);
  }
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

// ---------------------------------------------------------------------------------------------
// Scan

void RunScanEngine(const engine::ScanSpec& spec, const std::vector<const std::string*>& chunks) {
  engine::Visit(spec.dtype, spec.op, [&](auto t, auto o) {
    using T = typename decltype(t)::type;
    using Op = typename decltype(o)::type;
    const auto session = OpenSession("Scan", [&] { return Engine().NewScan(spec); });
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
    std::vector<T> want = canonical ? testing::CanonicalScanRef<T, Op>(x, spec.exclusive) : testing::ScanRef<T, Op>(x, spec.exclusive);
    if (spec.carry) {  // header.carry: folded into the array's own scan, an exclusive one's first result the carry
      T carry;
      std::memcpy(&carry, &*spec.carry, sizeof(T));
      for (T& y : want) y = Op()(carry, y);
      if (spec.exclusive && !want.empty()) want[0] = carry;
    }
    ExpectSame(got, want,
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
    const auto session = OpenSession("Reduce", [&] { return Engine().NewReduce(spec); });
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
    const auto session = OpenSession("Compact", [&] { return Engine().NewCompact(spec); });
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

// One call whose requests carry a header, `data` and a second stream matched to it by element
// position (Compact's flags, SegmentedScan's and ReduceByKey's keys, Sort's values): the server's
// checks in order, PairedChecker with the RPC's side (side_of(spec)); to_spec(header, spec) is
// the RPC's header check. run(spec, accepted, status) then gets the requests accepted so far.
// What a paired call checks beyond its chunks: nothing here; Sort's --max-sort-bytes below.
struct NoBudget {
  template <class Spec>
  grpc::Status Open(const Spec&, std::optional<uint64_t>) {
    return grpc::Status::OK;
  }
  grpc::Status Add(uint64_t) { return grpc::Status::OK; }
};

template <class Header, class Spec, class ToSpec, class SideOf, class Run, class Budget = NoBudget>
Result FuzzPairedCall(const std::vector<Request>& requests, uint64_t chunk_bytes, uint64_t max_request_bytes,
                      ToSpec to_spec, SideOf side_of, Run run, Budget budget = {}) {
  grpc::Status st = requests.empty() ? server::EmptyStreamStatus() : grpc::Status::OK;
  Spec spec;
  std::optional<server::PairedChecker> checker;
  std::vector<const Request*> accepted;
  for (uint64_t i = 0; st.ok() && i < requests.size(); ++i) {
    const Request& r = requests[i];
    st = server::CheckHeaderPlacement(i, r.has_header);
    if (st.ok() && i == 0) {
      const auto h = ParseHeader<Header>(r.header);
      st = to_spec(h, &spec);
      if (st.ok()) checker.emplace(spec.dtype, side_of(spec), DeclaredCount(h), chunk_bytes, max_request_bytes);
      if (st.ok()) st = budget.Open(spec, DeclaredCount(h));
    }
    if (st.ok()) st = checker->Add(r.data.size(), r.flags.size(), i);
    if (st.ok()) st = budget.Add(r.data.size() + r.flags.size());
    if (st.ok()) accepted.push_back(&r);
  }
  if (st.ok()) st = checker->Finish();
  if (!st.ok()) CheckRejected(st);
  if (checker) run(spec, accepted, st);
  return {st, checker ? checker->elements() : 0};
}

Result FuzzCompact(const std::vector<Request>& requests, uint64_t chunk_bytes, uint64_t max_request_bytes) {
  return FuzzPairedCall<v1::CompactHeader, engine::CompactSpec>(
      requests, chunk_bytes, max_request_bytes,
      [](const v1::CompactHeader& h, engine::CompactSpec* spec) { return server::ToEngine(h, spec); },
      server::CompactSide,
      [](const engine::CompactSpec& spec, const std::vector<const Request*>& accepted, const grpc::Status&) {
        RunCompactEngine(spec, accepted);
      });
}

// ---------------------------------------------------------------------------------------------
// Histogram

void RunHistogramEngine(const engine::HistogramSpec& spec, const std::vector<const std::string*>& chunks) {
  engine::VisitDType(spec.dtype, [&](auto t) {
    using T = typename decltype(t)::type;
    const auto session = OpenSession("Histogram", [&] { return Engine().NewHistogram(spec); });
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
    const auto session = OpenSession("Scan2D", [&] { return Engine().NewScan2D(spec); });
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

// ---------------------------------------------------------------------------------------------
// SegmentedScan, ReduceByKey: values and keys (or head bytes) matched by position through the
// handlers' FlagsAligner, then the engine's segmented scan (or engine::RunReducer, as the
// ReduceByKey handler runs it) against the references.

// The paired streams' assembly: the engine got their common prefix (in elements), in order, and
// the aligner holds back exactly the rest. `all_*` are the streams as sent, `given_*` as passed on.
void CheckPairedAssembly(const std::string& all_values, const std::string& all_side, const std::string& given_values,
                         const std::string& given_side, size_t value_size, size_t side_size,
                         const server::FlagsAligner& aligner, const std::string& what) {
  const uint64_t values = all_values.size() / value_size, sides = all_side.size() / side_size;
  const uint64_t common = std::min(values, sides);
  if (given_values.size() != common * value_size || given_side.size() != common * side_size) {
    Fail(what + ": the aligner passed " + std::to_string(given_values.size() / value_size) + " values and " +
         std::to_string(given_side.size() / side_size) + " keys, expected " + std::to_string(common) + " of each");
  }
  if (all_values.compare(0, given_values.size(), given_values) != 0 ||
      all_side.compare(0, given_side.size(), given_side) != 0) {
    Fail(what + ": the aligner passed values or keys that differ from those sent, or out of order");
  }
  if (aligner.values_waiting() != values - common || aligner.flags_waiting() != sides - common) {
    Fail(what + ": the aligner holds the wrong backlog");
  }
}

// Segment heads of the keys passed to the engine: head bytes as they are, keys (compared as bits:
// equality is all that matters, so signedness is moot) where one differs from the key before.
std::vector<uint8_t> HeadsOf(const engine::SegmentedScanSpec& spec, const std::string& keys) {
  if (spec.heads) return std::vector<uint8_t>(keys.begin(), keys.end());
  const size_t size = server::SegmentedScanSide(spec).size;
  if (size == 4) return testing::HeadsOfKeys(Elements<uint32_t>(keys));
  if (size == 8) return testing::HeadsOfKeys(Elements<uint64_t>(keys));
  Fail("segment keys of " + std::to_string(size) + " bytes passed validation");
}

// Feeds the accepted requests' values and keys through the handler's FlagsAligner; each run of
// n elements that has both goes to process(values, keys, n) as unaligned copies.
template <class Process>
void AlignPaired(const engine::SegmentedScanSpec& spec, const std::vector<const Request*>& requests,
                 const std::string& what, std::string* given_values, std::string* given_keys, Process process) {
  const size_t value_size = engine::SizeOf(spec.dtype), key_size = server::SegmentedScanSide(spec).size;
  server::FlagsAligner aligner(value_size, key_size);  // as the handlers build it
  std::string all_values, all_keys;
  for (const Request* r : requests) {
    all_values += r->data;
    all_keys += r->flags;
    aligner.Add(r->data, r->flags, [&](const char* values, const uint8_t* keys, uint64_t n) {
      if (n == 0) Fail(what + ": the aligner passed an empty run");
      Unaligned v(values, n * value_size), k(keys, n * key_size);
      process(v.data(), k.data(), n);
      given_values->append(values, n * value_size);
      given_keys->append(reinterpret_cast<const char*>(keys), n * key_size);
    });
  }
  CheckPairedAssembly(all_values, all_keys, *given_values, *given_keys, value_size, key_size, aligner, what);
}

std::string SegmentsName(const engine::SegmentedScanSpec& spec) {
  return spec.heads ? std::string("heads") : "keys " + std::string(engine::Name(spec.key_dtype));
}

void RunSegmentedScanEngine(const engine::SegmentedScanSpec& spec, const std::vector<const Request*>& requests) {
  engine::Visit(spec.dtype, spec.op, [&](auto t, auto o) {
    using T = typename decltype(t)::type;
    using Op = typename decltype(o)::type;
    const auto session = OpenSession("SegmentedScan", [&] { return Engine().NewSegmentedScan(spec); });
    const std::string what = "segmented scan " + std::string(engine::Name(spec.op)) + " " +
                             std::string(engine::Name(spec.dtype)) + (spec.exclusive ? " exclusive" : " inclusive") +
                             ", " + SegmentsName(spec);
    engine::StageTimes times;
    std::string given_values, given_keys, got;
    AlignPaired(spec, requests, what, &given_values, &given_keys, [&](const void* values, const void* keys, uint64_t n) {
      Unaligned out(nullptr, n * sizeof(T), 0xA5);  // poisoned: unwritten elements show
      session->Process(values, keys, out.data(), n, times);
      got.append(reinterpret_cast<const char*>(out.data()), n * sizeof(T));
    });
    const std::vector<T> x = Elements<T>(given_values);
    const std::vector<uint8_t> heads = HeadsOf(spec, given_keys);
    // SegmentedScanHeader: float SUM/PRODUCT associate in the canonical tree over (head, value)
    // pairs, every other pair is exact, so the sequential scan is its reference.
    const std::vector<T> want = testing::kRounds<T, Op> ? testing::SegmentedCanonicalRef<T, Op>(x, heads, spec.exclusive)
                                                        : testing::SegmentedScanRef<T, Op>(x, heads, spec.exclusive);
    ExpectSame(Elements<T>(got), want, what);
  });
}

Result FuzzSegmentedScan(const std::vector<Request>& requests, uint64_t chunk_bytes, uint64_t max_request_bytes) {
  return FuzzPairedCall<v1::SegmentedScanHeader, engine::SegmentedScanSpec>(
      requests, chunk_bytes, max_request_bytes,
      [](const v1::SegmentedScanHeader& h, engine::SegmentedScanSpec* spec) { return server::ToEngine(h, spec); },
      server::SegmentedScanSide,
      [](const engine::SegmentedScanSpec& spec, const std::vector<const Request*>& accepted, const grpc::Status&) {
        RunSegmentedScanEngine(spec, accepted);
      });
}

void RunReduceByKeyEngine(const engine::SegmentedScanSpec& spec, const std::vector<const Request*>& requests) {
  engine::Visit(spec.dtype, spec.op, [&](auto t, auto o) {
    using T = typename decltype(t)::type;
    using Op = typename decltype(o)::type;
    std::optional<engine::RunReducer> reducer;
    try {
      reducer.emplace(Engine(), spec);
    } catch (const std::exception& e) {
      Fail(std::string("a validated ReduceByKey header made the engine throw: ") + e.what());
    }
    const size_t key_size = server::SegmentedScanSide(spec).size;
    const std::string what = "reduce by key " + std::string(engine::Name(spec.op)) + " " +
                             std::string(engine::Name(spec.dtype)) + ", " + SegmentsName(spec);
    engine::StageTimes times;
    std::string given_values, given_keys, got_keys, got_values;
    uint64_t runs = 0;
    // Each call appends one key and one value per run it completed, and says how many.
    auto count = [&](uint64_t k) {
      runs += k;
      if (got_keys.size() != runs * key_size || got_values.size() != runs * sizeof(T)) {
        Fail(what + ": " + std::to_string(runs) + " runs reported, " + std::to_string(got_keys.size()) +
             " bytes of keys and " + std::to_string(got_values.size()) + " of values written");
      }
    };
    AlignPaired(spec, requests, what, &given_values, &given_keys, [&](const void* values, const void* keys, uint64_t n) {
      count(reducer->Process(values, keys, n, &got_keys, &got_values, times));
    });
    count(reducer->Finish(&got_keys, &got_values));
    const std::vector<T> x = Elements<T>(given_values);
    const std::vector<uint8_t> heads = HeadsOf(spec, given_keys);
    // ReduceByKeyHeader: one (key, op over the run's values in order) per run; float SUM/PRODUCT
    // give the canonical segmented scan's bits at the run's last element.
    auto check = [&](auto key_type) {
      using K = decltype(key_type);  // the keys as bits (unsigned, of key_dtype's size)
      const std::vector<K> keys = Elements<K>(given_keys);
      auto want = testing::ReduceByKeyRef<T, Op, K>(x, keys);
      if constexpr (testing::kRounds<T, Op>) {
        const std::vector<T> tree = testing::SegmentedCanonicalRef<T, Op>(x, heads, false);
        for (size_t i = 0, r = 0; i < x.size(); ++i) {
          if (i + 1 == x.size() || heads[i + 1]) want.second[r++] = tree[i];
        }
      }
      ExpectSame(Elements<K>(got_keys), want.first, what + ", keys");
      ExpectSame(Elements<T>(got_values), want.second, what + ", values");
    };
    if (key_size == 4) {
      check(uint32_t{});
    } else {
      check(uint64_t{});
    }
  });
}

Result FuzzReduceByKey(const std::vector<Request>& requests, uint64_t chunk_bytes, uint64_t max_request_bytes) {
  return FuzzPairedCall<v1::ReduceByKeyHeader, engine::SegmentedScanSpec>(
      requests, chunk_bytes, max_request_bytes,
      [](const v1::ReduceByKeyHeader& h, engine::SegmentedScanSpec* spec) { return server::ToEngine(h, spec); },
      server::SegmentedScanSide,
      [](const engine::SegmentedScanSpec& spec, const std::vector<const Request*>& accepted, const grpc::Status&) {
        RunReduceByKeyEngine(spec, accepted);
      });
}

// ---------------------------------------------------------------------------------------------
// Sort: keys (data) and values (the second stream) held whole, as the handler holds them, and
// sorted by the engine only once the call is accepted (the handler sorts in Complete, after
// PairedChecker::Finish); against std::stable_sort with the order written from SortHeader's
// definition (SortBefore, request_fuzz_common.h; not from sortkey's coding).

void RunSortEngine(const engine::SortSpec& spec, const std::vector<const Request*>& requests) {
  engine::VisitDType(spec.dtype, [&](auto t) {
    using T = typename decltype(t)::type;
    const size_t value_size = spec.has_values ? engine::SizeOf(spec.values_dtype) : 0;
    std::string keys, values;  // the whole input, as the handler holds it
    for (const Request* r : requests) {
      keys += r->data;
      values += r->flags;
    }
    const uint64_t n = keys.size() / sizeof(T);
    if (keys.size() != n * sizeof(T) || values.size() != n * value_size) {
      Fail("an accepted sort has " + std::to_string(keys.size()) + " bytes of keys and " +
           std::to_string(values.size()) + " of values");
    }
    Unaligned in_keys(keys.data(), keys.size()), in_values(values.data(), values.size());
    Unaligned out_keys(nullptr, keys.size(), 0xA5), out_values(nullptr, values.size(), 0xA5);
    std::vector<int64_t> indices(spec.want_indices ? n : 0, -7);
    engine::StageTimes times;
    try {
      Engine().Sort(spec, in_keys.data(), in_values.data(), n, spec.want_keys ? out_keys.data() : nullptr,
                    spec.has_values ? out_values.data() : nullptr, spec.want_indices ? indices.data() : nullptr, times);
    } catch (const std::exception& e) {
      Fail(std::string("a validated Sort header made the engine throw: ") + e.what());
    }
    const std::vector<T> x = Elements<T>(keys);
    std::vector<int64_t> order(n);
    for (uint64_t i = 0; i < n; ++i) order[i] = static_cast<int64_t>(i);
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
      return spec.descending ? SortBefore(x[b], x[a]) : SortBefore(x[a], x[b]);
    });
    const std::string what = "sort " + std::string(engine::Name(spec.dtype)) +
                             (spec.descending ? " descending" : " ascending") + " of " + std::to_string(n) + " keys";
    if (spec.want_keys) {
      std::string want(keys.size(), '\0');
      for (uint64_t i = 0; i < n; ++i) std::memcpy(&want[i * sizeof(T)], &keys[order[i] * sizeof(T)], sizeof(T));
      if (std::memcmp(out_keys.data(), want.data(), want.size()) != 0) {
        ExpectSame(Elements<T>(std::string(reinterpret_cast<const char*>(out_keys.data()), keys.size())),
                   Elements<T>(want), what + ", keys");
        Fail(what + ": keys differ in their bits");
      }
    }
    if (spec.has_values) {
      std::string want(values.size(), '\0');
      for (uint64_t i = 0; i < n; ++i) std::memcpy(&want[i * value_size], &values[order[i] * value_size], value_size);
      if (std::memcmp(out_values.data(), want.data(), want.size()) != 0) {
        Fail(what + ": values (" + std::string(engine::Name(spec.values_dtype)) + ") not moved with their keys");
      }
    }
    if (spec.want_indices) ExpectSame(indices, order, what + ", indices (not the stable permutation)");
  });
}

// --max-sort-bytes, as the handler checks it (server::SortBudget).
struct SortBytes {
  uint64_t max;
  std::optional<server::SortBudget> budget;
  grpc::Status Open(const engine::SortSpec& spec, std::optional<uint64_t> count) {
    budget.emplace(spec, max);
    return budget->CheckDeclared(count);
  }
  grpc::Status Add(uint64_t bytes) { return budget->Add(bytes); }
};

Result FuzzSort(const std::vector<Request>& requests, uint64_t chunk_bytes, uint64_t max_request_bytes,
                uint64_t max_sort_bytes) {
  return FuzzPairedCall<v1::SortHeader, engine::SortSpec>(
      requests, chunk_bytes, max_request_bytes,
      [](const v1::SortHeader& h, engine::SortSpec* spec) { return server::ToEngine(h, spec); },
      [](const engine::SortSpec& spec) { return server::SortSide(spec); },
      [](const engine::SortSpec& spec, const std::vector<const Request*>& accepted, const grpc::Status& status) {
        if (status.ok()) RunSortEngine(spec, accepted);
      },
      SortBytes{max_sort_bytes, std::nullopt});
}

}  // namespace

[[noreturn]] void Fail(const std::string& why) {
  std::fprintf(stderr, "request fuzzer: invariant violated: %s\n", why.c_str());
  std::fflush(stderr);
  std::abort();
}

Result FuzzCall(int rpc, const std::vector<Request>& requests, uint64_t chunk_bytes, uint64_t max_request_bytes,
                uint64_t max_sort_bytes) {
  switch (rpc) {
    case 0: return FuzzScan(requests, chunk_bytes, max_request_bytes);
    case 1: return FuzzReduce(requests, chunk_bytes, max_request_bytes);
    case 2: return FuzzCompact(requests, chunk_bytes, max_request_bytes);
    case 3: return FuzzHistogram(requests, chunk_bytes, max_request_bytes);
    case 4: return FuzzScan2D(requests, chunk_bytes, max_request_bytes);
    case 5: return FuzzSegmentedScan(requests, chunk_bytes, max_request_bytes);
    case 6: return FuzzReduceByKey(requests, chunk_bytes, max_request_bytes);
    default: return FuzzSort(requests, chunk_bytes, max_request_bytes, max_sort_bytes);
  }
}

}  // namespace gpuscan::fuzz
