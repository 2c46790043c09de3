// gpuscan bench --e2e: drives Scan/Reduce/Compact calls of one size at several concurrency
// levels, like ghz or perf_analyzer, and measures the transport ceiling (the Transport RPC:
// same bytes, same concurrency, no compute) in the same run.
//
// - One shared Client (one channel) for every worker thread, as ghz does by default; the
//   ceiling runs over the same channel, so both see the same connection.
// - Input generated randomly once per run and streamed from memory by every request.
// - Per level: requests/s, GB/s of input, latency p50/p90/p99 (ms), the server's Timing stages
//   averaged over requests, and the ceiling's numbers with the service as % of it.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <stdexcept>
#include <thread>

#include "bench.h"
#include "bench_e2e_resident.h"
#include "bench_e2e_shm.h"
#include "gpuscan/json.h"
#include "names.h"
#include "shm_option.h"

namespace gpuscan::cli {
namespace {

using Clock = std::chrono::steady_clock;

// Random input: values in a small symmetric range (unsigned: [0, 2000)), so sums stay tame and
// the compaction's predicate (x > 0, unsigned x > 1000) keeps about half.
template <class T>
void FillRandom(std::string& buf, uint64_t n) {
  std::mt19937_64 rng(std::random_device{}());
  T* out = reinterpret_cast<T*>(buf.data());
  if constexpr (std::is_floating_point_v<T>) {
    std::uniform_real_distribution<T> d(-1, 1);
    for (uint64_t i = 0; i < n; ++i) out[i] = d(rng);
  } else if constexpr (std::is_signed_v<T>) {
    std::uniform_int_distribution<T> d(-1000, 1000);
    for (uint64_t i = 0; i < n; ++i) out[i] = d(rng);
  } else {
    std::uniform_int_distribution<T> d(0, 1999);
    for (uint64_t i = 0; i < n; ++i) out[i] = d(rng);
  }
}

// The inclusive SUM scan of `input` with wrap-around, what the service must answer (integer
// dtypes: exact whatever the chunking); empty for floats, whose rounding depends on it.
template <class T>
std::string ExpectedSum(const std::string& input) {
  using U = std::make_unsigned_t<T>;
  std::string out(input.size(), '\0');
  const size_t n = input.size() / sizeof(T);
  U acc = 0;
  for (size_t i = 0; i < n; ++i) {
    U x;
    std::memcpy(&x, input.data() + i * sizeof(T), sizeof(T));
    acc = static_cast<U>(acc + x);
    std::memcpy(out.data() + i * sizeof(T), &acc, sizeof(T));
  }
  return out;
}

std::string ExpectedScan(v1::DType dtype, const std::string& input) {
  switch (dtype) {
    case v1::DTYPE_INT32: return ExpectedSum<int32_t>(input);
    case v1::DTYPE_INT64: return ExpectedSum<int64_t>(input);
    case v1::DTYPE_UINT32: return ExpectedSum<uint32_t>(input);
    case v1::DTYPE_UINT64: return ExpectedSum<uint64_t>(input);
    default: return {};
  }
}

// A Sink that compares what arrives with `expected` by position (empty: takes anything); with
// lanes each lane's reader compares its own results at once.
// plain: a plain Sink, fed in order.
Sink CheckingSink(const std::string& expected, bool plain) {
  if (expected.empty()) return [](const void*, size_t) {};
  SinkAt at([&expected](uint64_t offset, const void* data, size_t bytes) {
    if (offset > expected.size() || bytes > expected.size() - offset ||
        std::memcmp(expected.data() + offset, data, bytes) != 0) {
      throw std::runtime_error("wrong scan result in bytes [" + std::to_string(offset) + ", " +
                               std::to_string(offset + bytes) + ")");
    }
  });
  if (plain) return [at](const void* data, size_t bytes) mutable { at(data, bytes); };
  return at;
}

// The one place that turns the wire dtype into an element type here.
std::string RandomInput(v1::DType dtype, uint64_t n) {
  std::string buf(n * DTypeSize(dtype), '\0');
  switch (dtype) {
    case v1::DTYPE_INT32: FillRandom<int32_t>(buf, n); break;
    case v1::DTYPE_INT64: FillRandom<int64_t>(buf, n); break;
    case v1::DTYPE_UINT32: FillRandom<uint32_t>(buf, n); break;
    case v1::DTYPE_UINT64: FillRandom<uint64_t>(buf, n); break;
    case v1::DTYPE_FLOAT32: FillRandom<float>(buf, n); break;
    case v1::DTYPE_FLOAT64: FillRandom<double>(buf, n); break;
    default: throw std::invalid_argument("unsupported dtype");
  }
  return buf;
}

// A Source over the shared input (one copy per chunk, into the request message; by position,
// so lanes copy at once, unless plain).
Source MemorySource(const std::string& data, bool plain) {
  SourceAt at = SourceAt::Memory(data.data(), data.size());
  if (plain) return [at](void* buf, size_t max) mutable { return at(buf, max); };
  return at;
}

struct Sample {
  double latency_ms = 0;
  Timing timing;  // the service's Timing (unset for the ceiling)
};

struct LevelResult {
  unsigned concurrency = 0;
  uint64_t requests = 0, errors = 0;
  double elapsed_s = 0, requests_per_s = 0, gbps = 0;
  double p50 = 0, p90 = 0, p99 = 0;  // ms
  // Mean of the server's Timing over requests (microseconds).
  double receive = 0, queue = 0, h2d = 0, kernel = 0, d2h = 0, send = 0, total = 0;
  std::string first_error;
};

double Percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  size_t rank = static_cast<size_t>(std::ceil(p * static_cast<double>(sorted.size())));
  return sorted[std::min(sorted.size(), std::max<size_t>(rank, 1)) - 1];
}

// Runs `call` from `concurrency` threads until the level's budget is spent; `bytes` of input
// per call.
template <class Call>
LevelResult RunLevel(unsigned concurrency, const E2EArgs& a, uint64_t bytes, Call&& call) {
  std::atomic<int64_t> budget{a.requests ? static_cast<int64_t>(a.requests) : INT64_MAX};
  const Clock::time_point start = Clock::now();
  const Clock::time_point deadline =
      a.requests ? Clock::time_point::max()
                 : start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(a.duration_s));
  std::mutex mu;
  std::vector<Sample> samples;
  LevelResult r;
  r.concurrency = concurrency;
  Clock::time_point last_end = start;
  std::vector<std::thread> workers;
  for (unsigned w = 0; w < concurrency; ++w) {
    workers.emplace_back([&] {
      std::vector<Sample> mine;
      uint64_t errors = 0;
      std::string first_error;
      Clock::time_point my_last = start;
      while (Clock::now() < deadline && budget.fetch_sub(1) > 0) {
        const Clock::time_point t0 = Clock::now();
        Sample s;
        try {
          s.timing = call();
        } catch (const std::exception& e) {
          if (errors++ == 0) first_error = e.what();
          continue;
        }
        my_last = Clock::now();
        s.latency_ms = std::chrono::duration<double, std::milli>(my_last - t0).count();
        mine.push_back(std::move(s));
      }
      std::lock_guard<std::mutex> lock(mu);
      samples.insert(samples.end(), mine.begin(), mine.end());
      r.errors += errors;
      if (r.first_error.empty()) r.first_error = first_error;
      last_end = std::max(last_end, my_last);
    });
  }
  for (auto& t : workers) t.join();
  r.requests = samples.size();
  r.elapsed_s = std::chrono::duration<double>(last_end - start).count();
  if (r.requests > 0 && r.elapsed_s > 0) {
    r.requests_per_s = static_cast<double>(r.requests) / r.elapsed_s;
    r.gbps = r.requests_per_s * static_cast<double>(bytes) / 1e9;
  }
  std::vector<double> lat;
  for (const auto& s : samples) {
    lat.push_back(s.latency_ms);
    r.receive += static_cast<double>(s.timing.receive_us);
    r.queue += static_cast<double>(s.timing.queue_us);
    r.h2d += static_cast<double>(s.timing.h2d_us);
    r.kernel += static_cast<double>(s.timing.kernel_us);
    r.d2h += static_cast<double>(s.timing.d2h_us);
    r.send += static_cast<double>(s.timing.send_us);
    r.total += static_cast<double>(s.timing.total_us);
  }
  if (!samples.empty()) {
    const double n = static_cast<double>(samples.size());
    for (double* v : {&r.receive, &r.queue, &r.h2d, &r.kernel, &r.d2h, &r.send, &r.total}) *v /= n;
  }
  std::sort(lat.begin(), lat.end());
  r.p50 = Percentile(lat, 0.50);
  r.p90 = Percentile(lat, 0.90);
  r.p99 = Percentile(lat, 0.99);
  return r;
}

// `calls` untimed calls, one after the other; a failing one fails its level the same way, so
// its error is left for the timed calls to report.
template <class Call>
void WarmUp(uint32_t calls, Call&& call) {
  for (uint32_t i = 0; i < calls; ++i) {
    try {
      call();
    } catch (const std::exception&) {
      return;
    }
  }
}

std::string LatencyJson(const LevelResult& r) {
  return "{\"p50\":" + JsonNumber(r.p50) + ",\"p90\":" + JsonNumber(r.p90) + ",\"p99\":" + JsonNumber(r.p99) + "}";
}

std::string LevelJson(const LevelResult& s, const LevelResult& c, bool echo, double pct) {
  std::string j = "{\"concurrency\":" + std::to_string(s.concurrency) + ",\"requests\":" + std::to_string(s.requests) +
                  ",\"errors\":" + std::to_string(s.errors) + ",\"elapsed_s\":" + JsonNumber(s.elapsed_s) +
                  ",\"requests_per_s\":" + JsonNumber(s.requests_per_s) + ",\"gbps\":" + JsonNumber(s.gbps) +
                  ",\"latency_ms\":" + LatencyJson(s) + ",\"stages_us\":{\"receive\":" + JsonNumber(s.receive) +
                  ",\"queue\":" + JsonNumber(s.queue) + ",\"h2d\":" + JsonNumber(s.h2d) +
                  ",\"kernel\":" + JsonNumber(s.kernel) + ",\"d2h\":" + JsonNumber(s.d2h) +
                  ",\"send\":" + JsonNumber(s.send) + ",\"total\":" + JsonNumber(s.total) + "}";
  if (!s.first_error.empty()) j += ",\"first_error\":" + JsonQuote(s.first_error);
  j += ",\"ceiling\":{\"echo\":" + std::string(echo ? "true" : "false") +
       ",\"requests\":" + std::to_string(c.requests) + ",\"errors\":" + std::to_string(c.errors) +
       ",\"elapsed_s\":" + JsonNumber(c.elapsed_s) + ",\"requests_per_s\":" + JsonNumber(c.requests_per_s) +
       ",\"gbps\":" + JsonNumber(c.gbps) + ",\"latency_ms\":" + LatencyJson(c) + "}";
  j += ",\"pct_of_ceiling\":" + JsonNumber(pct) + "}";
  return j;
}

// One sharded call (ClientOptions::shards) through the typed API, which holds arrays in memory.
// A scan writes into `out` (the input's size, allocated once outside the timed calls, as a
// caller that reuses its buffers would).
template <class T>
Timing ShardedCall(Client& client, const std::string& op, const std::string& input, uint32_t lanes, uint32_t shards,
                   const std::string& expected, std::string& out) {
  const T* x = reinterpret_cast<const T*>(input.data());  // std::string data is suitably aligned for T
  const size_t n = input.size() / sizeof(T);
  if (op == "scan") {
    ScanOptions so;
    so.lanes = lanes;
    so.shards = shards;
    const Timing t = client.ScanInto(x, n, reinterpret_cast<T*>(out.data()), so);
    if (!expected.empty() && std::memcmp(out.data(), expected.data(), expected.size()) != 0) {
      throw std::runtime_error("sharded scan result differs from the expected prefix sums");
    }
    return t;
  }
  if (op == "reduce") return client.Reduce(x, n, v1::OPERATOR_SUM, lanes, shards).timing;
  CompactOptions co;
  co.lanes = lanes;
  co.shards = shards;
  co.predicate.set_op(v1::PREDICATE_OP_GT);
  if constexpr (std::is_floating_point_v<T>) {
    co.predicate.mutable_threshold()->set_float_value(0);
  } else if constexpr (std::is_signed_v<T>) {
    co.predicate.mutable_threshold()->set_int_value(0);
  } else {
    co.predicate.mutable_threshold()->set_uint_value(1000);
  }
  return client.Compact(x, n, co).timing;
}

Timing ShardedCall(Client& client, v1::DType dtype, const std::string& op, const std::string& input, uint32_t lanes,
                   uint32_t shards, const std::string& expected, std::string& out) {
  switch (dtype) {
    case v1::DTYPE_INT32: return ShardedCall<int32_t>(client, op, input, lanes, shards, expected, out);
    case v1::DTYPE_INT64: return ShardedCall<int64_t>(client, op, input, lanes, shards, expected, out);
    case v1::DTYPE_UINT32: return ShardedCall<uint32_t>(client, op, input, lanes, shards, expected, out);
    case v1::DTYPE_UINT64: return ShardedCall<uint64_t>(client, op, input, lanes, shards, expected, out);
    case v1::DTYPE_FLOAT32: return ShardedCall<float>(client, op, input, lanes, shards, expected, out);
    default: return ShardedCall<double>(client, op, input, lanes, shards, expected, out);
  }
}

}  // namespace

int RunE2EBench(const E2EArgs& a, const GlobalOptions& g) {
  const v1::DType dtype = ParseDType(a.dtype);
  const size_t esize = DTypeSize(dtype);
  const uint64_t n = a.bytes ? a.bytes / esize : a.elements;
  if (n == 0) throw std::invalid_argument("--bytes " + std::to_string(a.bytes) + " is less than one element");
  const uint64_t bytes = n * esize;
  if (a.concurrency.empty()) throw std::invalid_argument("--concurrency needs at least one level");
  // Scan and compact stream results back during the upload: their ceiling echoes. Reduce
  // answers once: its ceiling only counts.
  const bool echo = a.op != "reduce";

  Client client(MakeClientOptions(g));
  const v1::ServerInfo info = client.Info();
  const std::string device = info.devices().empty() ? "" : info.devices(0).name();
  const std::string input = RandomInput(dtype, n);
  const uint32_t lanes = std::max(a.lanes, 1u);
  const std::string expected = a.check && a.op == "scan" ? ExpectedScan(dtype, input) : std::string();
  if (a.check && expected.empty()) {
    std::printf("note: --check covers scan of integer dtypes only; not checking this run\n");
  }

  const uint32_t shards = std::max(a.shards, 1u);
  // Parallel plain calls of the ceiling: one per lane, or per shard (times its lanes).
  const uint32_t streams = shards > 1 ? shards * lanes : lanes;

  v1::Predicate predicate;  // compaction keeps about half of RandomInput's elements
  predicate.set_op(v1::PREDICATE_OP_GT);
  if (IsFloat(dtype)) {
    predicate.mutable_threshold()->set_float_value(0);
  } else if (IsSigned(dtype)) {
    predicate.mutable_threshold()->set_int_value(0);
  } else {
    predicate.mutable_threshold()->set_uint_value(1000);
  }
  std::optional<RegionPool> pool;
  if (a.shm) pool.emplace(ShmDir(a.shm_dir, client), input);
  if (a.shm && (a.lanes > 1 || a.shards > 1)) throw std::invalid_argument("--shm takes neither --lanes nor --shards");
  if (a.resident && (a.shm || a.lanes > 1 || a.shards > 1 || a.plain_io)) {
    throw std::invalid_argument("--resident takes none of --shm, --lanes, --shards, --plain-io");
  }
  std::optional<RemoteArray> remote;  // --resident: put once, before every level
  if (a.resident) remote.emplace(client.Put(dtype, input.data(), input.size()));

  const bool one_at_a_time = std::all_of(a.concurrency.begin(), a.concurrency.end(), [](unsigned c) { return c == 1; });
  std::string shard_out(shards > 1 && a.op == "scan" && one_at_a_time ? bytes : 0, '\0');
  auto service_call = [&]() -> Timing {
    if (remote) return ResidentCall(client, a, *remote, CheckingSink(expected, true), predicate);
    if (pool) {
      RegionPool::Pair* r = pool->Take();
      try {
        Timing t = SharedCall(client, a, dtype, *r, bytes, expected, predicate);
        pool->Give(r);
        return t;
      } catch (...) {
        pool->Give(r);
        throw;
      }
    }
    if (shards > 1) {
      // Concurrent calls each need their own output buffer; one level at concurrency 1 reuses one.
      std::string mine;
      std::string& out = shard_out.size() == bytes ? shard_out : (mine.resize(a.op == "scan" ? bytes : 0), mine);
      return ShardedCall(client, dtype, a.op, input, lanes, shards, expected, out);
    }
    if (a.op == "scan") {
      v1::ScanHeader h;
      h.set_dtype(dtype);
      h.set_op(v1::OPERATOR_SUM);
      h.set_element_count(n);
      Timing t = client.ScanStream(h, MemorySource(input, a.plain_io), CheckingSink(expected, a.plain_io), {}, lanes);
      if (!expected.empty() && t.bytes_out != bytes) throw std::runtime_error("scan result incomplete");
      return t;
    }
    if (a.op == "reduce") {
      v1::ReduceHeader h;
      h.set_dtype(dtype);
      h.set_op(v1::OPERATOR_SUM);
      h.set_element_count(n);
      return FromProto(client.ReduceStream(h, MemorySource(input, a.plain_io), {}, lanes).timing());
    }
    v1::CompactHeader h;
    h.set_dtype(dtype);
    h.set_element_count(n);
    *h.mutable_predicate() = predicate;
    return FromProto(
        client.CompactStream(h, MemorySource(input, a.plain_io), {}, [](const void*, size_t) {}, {}, {}, lanes).timing());
  };
  // The ceiling sends what the calls send, as they send it: the input itself, from where it lies,
  // when the calls do (an array in memory: SourceAt::Memory); a pattern copied into each message
  // when they copy (--plain-io's Source, shards' checked SourceAt).
  const void* ceiling_data = a.plain_io || shards > 1 ? nullptr : input.data();
  auto ceiling_call = [&]() -> Timing {
    if (remote) {
      client.Health();
      return {};
    }
    if (pool) {
      RegionPool::Pair* r = pool->Take();
      HostPass(r->in.data(), r->out.data(), bytes, echo);
      pool->Give(r);
      return {};
    }
    TransportResult t = streams > 1 ? client.TransportLanes(bytes, echo, streams, 0, ceiling_data)
                                    : client.Transport(bytes, echo, 0, ceiling_data);
    if (t.bytes_in != bytes || (echo && t.bytes_received != bytes)) {
      throw std::runtime_error("Transport moved " + std::to_string(t.bytes_in) + " bytes in, " +
                               std::to_string(t.bytes_received) + " back; expected " + std::to_string(bytes));
    }
    return {};
  };

  const std::string budget = a.requests ? std::to_string(a.requests) + " requests" : JsonNumber(a.duration_s) + " s";
  std::printf("e2e %s %s: %" PRIu64 " elements (%" PRIu64 " bytes) per request, %s per level, %s\n", a.op.c_str(),
              a.dtype.c_str(), n, bytes, budget.c_str(),
              shards > 1 ? (std::to_string(shards) + " shards per call over the target's servers" +
                            (lanes > 1 ? ", " + std::to_string(lanes) + " lanes each" : std::string()))
                               .c_str()
              : lanes > 1 ? (std::to_string(lanes) + " lanes per call, each on its own connection").c_str()
              : a.shm     ? "arrays in shared-memory regions, headers on one channel"
              : remote    ? "the array put once, resident on the server; headers and results on one channel"
                          : "one shared channel");
  const std::string ceiling_name =
      remote ? std::string("one unary call (Health) on the same channel; its p50 in ceil_GB/s's place, ms") :
      pool ? std::string(echo ? "the host copying" : "the host reading") + " the same bytes on " +
                 std::to_string(kHostThreads) + " threads"
           : std::string("Transport ") + (echo ? "with echo" : "without echo") + " of " +
                 (ceiling_data ? "the input in place" : "a pattern copied into each message");
  // TLS runs say so: their ceiling is the same Transport over the same TLS connections.
  const bool tls = g.tls.enabled || !g.tls.ca_file.empty() || !g.tls.cert_file.empty();
  const char* tls_name = !tls ? "plaintext" : !g.tls.cert_file.empty() ? "mutual TLS" : "TLS";
  std::printf("server %s (%s): %s engine%s%s; ceiling: %s%s%s\n", g.server.c_str(), tls_name, info.engine().c_str(),
              device.empty() ? "" : ", ", device.c_str(), ceiling_name.c_str(),
              streams > 1 ? (", " + std::to_string(streams) + " plain calls at once on connections of their own").c_str()
                          : "",
              expected.empty() ? "" : "; results checked");
  std::printf("%5s %9s %8s %9s %9s %9s | %9s %9s %9s %9s %9s %9s %9s | %9s %8s\n", "conc", "req/s", "GB/s", "p50_ms",
              "p90_ms", "p99_ms", "receive", "queue", "h2d", "kernel", "d2h", "send", "total", "ceil_GB/s", "%ceil");
  std::fflush(stdout);

  std::string levels_json;
  double best_gbps = 0;
  uint64_t errors = 0;
  std::string first_error;
  for (unsigned c : a.concurrency) {
    if (pool) {
      pool->Fill(c, [&](RegionPool::Pair& r) { SharedCall(client, a, dtype, r, bytes, expected, predicate); });
    }
    WarmUp(a.warmup_calls, service_call);
    const LevelResult s = RunLevel(c, a, bytes, service_call);
    WarmUp(a.warmup_calls, ceiling_call);
    const LevelResult t = RunLevel(c, a, bytes, ceiling_call);
    // Resident calls move no input: they compare with the floor's latency, not its bandwidth.
    const double pct = remote ? (s.p50 > 0 ? 100.0 * t.p50 / s.p50 : 0) : t.gbps > 0 ? 100.0 * s.gbps / t.gbps : 0;
    std::printf("%5u %9.1f %8.3f %9.3f %9.3f %9.3f | %9.0f %9.0f %9.0f %9.0f %9.0f %9.0f %9.0f | %9.3f %7.1f%%\n", c,
                s.requests_per_s, s.gbps, s.p50, s.p90, s.p99, s.receive, s.queue, s.h2d, s.kernel, s.d2h, s.send,
                s.total, remote ? t.p50 : t.gbps, pct);
    std::fflush(stdout);
    errors += s.errors + t.errors;
    if (first_error.empty()) first_error = !s.first_error.empty() ? s.first_error : t.first_error;
    levels_json += (levels_json.empty() ? "" : ",") + LevelJson(s, t, echo, pct);
    best_gbps = std::max(best_gbps, s.gbps);
  }
  std::printf("stage columns: the server's Timing, mean microseconds per request (stages overlap)\n");
  const std::string pcie_json = pool ? PcieCeiling(client, a, dtype, n, best_gbps) : "";

  if (!a.json_path.empty()) {
    std::string json = "{\"op\":" + JsonQuote(a.op) + ",\"dtype\":" + JsonQuote(a.dtype) +
                       ",\"elements\":" + std::to_string(n) + ",\"bytes_per_request\":" + std::to_string(bytes) +
                       ",\"duration_s\":" + (a.requests ? "null" : JsonNumber(a.duration_s)) +
                       ",\"requests_per_level\":" + (a.requests ? std::to_string(a.requests) : "null") +
                       ",\"warmup_calls\":" + std::to_string(a.warmup_calls) +
                       ",\"channel\":\"shared\",\"shm\":" + (a.shm ? "true" : "false") + ",\"resident\":" + (remote ? "true" : "false") + ",\"lanes\":" + std::to_string(lanes) + ",\"shards\":" + std::to_string(shards) +
                       ",\"checked\":" + (expected.empty() ? "false" : "true") + ",\"plain_io\":" + (a.plain_io ? "true" : "false") + ",\"server\":{\"target\":" + JsonQuote(g.server) + ",\"security\":" + JsonQuote(tls_name) +
                       ",\"engine\":" + JsonQuote(info.engine()) + ",\"device\":" + JsonQuote(device) +
                       ",\"version\":" + JsonQuote(info.version()) + "},\"ceiling_rpc\":{\"name\":" + (remote ? "\"Health\"" : pool ? "\"host\"" : "\"Transport\"") + ",\"echo\":" +
                       (echo ? "true" : "false") +
                       (pool ? ",\"host\":" + std::string(echo ? "\"memcpy\"" : "\"read\"") +
                                   ",\"threads\":" + std::to_string(kHostThreads)
                             : ",\"payload\":" + std::string(ceiling_data ? "\"input\"" : "\"pattern\"")) +
                       "}" + pcie_json + ",\"levels\":[" + levels_json + "]}\n";
    std::ofstream f(a.json_path, std::ios::binary);
    if (!f || !(f << json)) throw std::runtime_error("cannot write " + a.json_path);
  }
  if (errors > 0) {
    std::fprintf(stderr, "error: %" PRIu64 " calls failed; first: %s\n", errors, first_error.c_str());
    return kExitError;
  }
  return 0;
}

}  // namespace gpuscan::cli
