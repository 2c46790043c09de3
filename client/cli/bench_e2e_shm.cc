// gpuscan bench --e2e --shm (bench_e2e_shm.h): the arena pool, the shared-memory calls and
// their ceilings.
#include "bench_e2e_shm.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <stdexcept>
#include <thread>

#include "gpuscan/json.h"

namespace gpuscan::cli {

void RegionPool::Fill(unsigned count, const std::function<void(Pair&)>& warm) {
  while (all_.size() < count) {
    auto p = std::make_unique<Pair>();
    p->in = arena_.Carve(input_.size());
    std::memcpy(p->in.data(), input_.data(), input_.size());
    p->out = arena_.Carve(input_.size(), /*zero=*/false);
    for (const char* what : {"first call on fresh arena pieces", "second call on them"}) {
      const auto start = std::chrono::steady_clock::now();
      warm(*p);
      std::fprintf(stderr, "%s: %.1f ms\n", what,
                   std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
    }
    free_.push_back(p.get());
    all_.push_back(std::move(p));
  }
}

namespace {

template <class Part>
void OnHostThreads(size_t bytes, Part&& part) {  // part(from, to) on disjoint ranges
  std::vector<std::thread> threads;
  const size_t per = (bytes + kHostThreads - 1) / kHostThreads;
  for (unsigned t = 0; t < kHostThreads; ++t) {
    threads.emplace_back([&, t] {
      const size_t from = std::min(bytes, t * per), to = std::min(bytes, from + per);
      part(from, to);
    });
  }
  for (auto& th : threads) th.join();
}

bool SameBytes(const void* a, const void* b, size_t bytes) {
  std::atomic<bool> same{true};
  OnHostThreads(bytes, [&](size_t from, size_t to) {
    if (std::memcmp(static_cast<const char*>(a) + from, static_cast<const char*>(b) + from, to - from) != 0) {
      same = false;
    }
  });
  return same;
}

}  // namespace

void HostPass(const void* in, void* out, size_t bytes, bool copy) {
  std::atomic<uint64_t> fold{0};
  OnHostThreads(bytes, [&](size_t from, size_t to) {
    if (copy) {
      std::memcpy(static_cast<char*>(out) + from, static_cast<const char*>(in) + from, to - from);
      return;
    }
    uint64_t x = 0;
    for (size_t i = from; i + 8 <= to; i += 8) {
      uint64_t w;
      std::memcpy(&w, static_cast<const char*>(in) + i, 8);
      x ^= w;
    }
    fold ^= x;
  });
  volatile uint64_t sink = fold.load();  // the reads must happen
  (void)sink;
}

Timing SharedCall(Client& client, const E2EArgs& a, v1::DType dtype, RegionPool::Pair& r, size_t bytes,
                  const std::string& expected, const v1::Predicate& predicate) {
  if (a.op == "scan") {
    v1::ScanHeader h;
    h.set_dtype(dtype);
    h.set_op(v1::OPERATOR_SUM);
    Timing t = client.ScanShared(h, r.in.span(), &r.out.span());
    if (!expected.empty() && !SameBytes(r.out.data(), expected.data(), bytes)) {
      throw std::runtime_error("scan result differs from the expected prefix sums");
    }
    return t;
  }
  if (a.op == "reduce") {
    v1::ReduceHeader h;
    h.set_dtype(dtype);
    h.set_op(v1::OPERATOR_SUM);
    return FromProto(client.ReduceShared(h, r.in.span()).timing());
  }
  v1::CompactHeader h;
  h.set_dtype(dtype);
  *h.mutable_predicate() = predicate;
  return FromProto(client.CompactShared(h, r.in.span(), nullptr, &r.out.span(), nullptr).timing());
}

std::string PcieCeiling(Client& client, const E2EArgs& a, v1::DType dtype, uint64_t n, double best_gbps) {
  v1::BenchmarkRequest req;
  req.add_operations("pcie");
  req.add_dtypes(dtype);
  req.add_sizes(n);
  req.set_repetitions(5);
  std::map<std::string, double> gbps;
  try {
    client.Benchmark(req, [&](const v1::BenchmarkRow& w) {
      if (w.operation() == "pcie") gbps[w.algorithm()] = w.gbps();
    });
  } catch (const std::exception& e) {
    std::printf("PCIe ceiling: not measured (%s)\n", e.what());
    return "";
  }
  const std::string applies = a.op == "reduce" ? "h2d" : "duplex";
  const double ceiling = gbps[applies];
  std::printf("PCIe ceiling, pinned cudaMemcpyAsync of the same bytes on the server's device: H2D %.3f, D2H %.3f, "
              "both at once %.3f GB/s each way; best level %.3f GB/s = %.1f%% of %s\n",
              gbps["h2d"], gbps["d2h"], gbps["duplex"], best_gbps, ceiling > 0 ? 100.0 * best_gbps / ceiling : 0.0,
              applies == "h2d" ? "H2D" : "both at once");
  return ",\"pcie\":{\"h2d_gbps\":" + JsonNumber(gbps["h2d"]) + ",\"d2h_gbps\":" + JsonNumber(gbps["d2h"]) +
         ",\"duplex_gbps\":" + JsonNumber(gbps["duplex"]) + ",\"applies\":" + JsonQuote(applies) +
         ",\"best_level_pct\":" + JsonNumber(ceiling > 0 ? 100.0 * best_gbps / ceiling : 0.0) + "}";
}

}  // namespace gpuscan::cli
