#include "metrics/metrics.h"

#include <mutex>
#include <unordered_map>
#include <utility>

#include <prometheus/collectable.h>
#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/metric_family.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

namespace gpuscan::server {

const char* StageName(Stage stage) {
  switch (stage) {
    case Stage::kReceive: return "receive";
    case Stage::kQueue: return "queue";
    case Stage::kH2d: return "h2d";
    case Stage::kKernel: return "kernel";
    case Stage::kD2h: return "d2h";
    case Stage::kSend: return "send";
    case Stage::kTotal: return "total";
  }
  return "unknown";
}

namespace {

prometheus::MetricFamily GaugeFamily(const std::string& name, const std::string& help) {
  prometheus::MetricFamily f;
  f.name = name;
  f.help = help;
  f.type = prometheus::MetricType::Gauge;
  return f;
}

void AddSample(prometheus::MetricFamily& f, double value, std::vector<prometheus::ClientMetric::Label> labels = {}) {
  prometheus::ClientMetric m;
  m.label = std::move(labels);
  m.gauge.value = value;
  f.metric.push_back(std::move(m));
}

// The gauges that describe the present, built afresh at every scrape: admission's counts and
// the device's memory have no event to update them on, and reading them costs little.
class ScrapeTimeGauges final : public prometheus::Collectable {
 public:
  ScrapeTimeGauges(const engine::Engine& engine, Metrics::Gauges gauges)
      : engine_(engine), gauges_(std::move(gauges)) {}

  std::vector<prometheus::MetricFamily> Collect() const override {
    std::vector<prometheus::MetricFamily> out;
    // One sample each, read now; a gauge with no reader is left out.
    auto scalar = [&out](const std::function<uint64_t()>& read, const char* name, const char* help) {
      if (!read) return;
      auto f = GaugeFamily(name, help);
      AddSample(f, static_cast<double>(read()));
      out.push_back(std::move(f));
    };
    scalar(gauges_.admission_running, "gpuscan_admission_running", "Calls holding an admission slot (computing) now.");
    scalar(gauges_.admission_queued, "gpuscan_admission_queued", "Calls waiting for an admission slot now.");
    scalar(gauges_.resident_bytes, "gpuscan_resident_bytes",
           "Memory held for resident arrays now (dropped ones still in use included).");
    scalar(gauges_.resident_arrays, "gpuscan_resident_arrays", "Resident arrays kept now, every tenant's.");
    scalar(gauges_.resident_spilled_bytes, "gpuscan_resident_spilled_bytes",
           "Host memory held for resident arrays spilled past the budget now.");
    auto counter = [&out](const std::function<uint64_t()>& read, const char* name, const char* help) {
      if (!read) return;
      prometheus::MetricFamily f;
      f.name = name;
      f.help = help;
      f.type = prometheus::MetricType::Counter;
      prometheus::ClientMetric m;
      m.counter.value = static_cast<double>(read());
      f.metric.push_back(std::move(m));
      out.push_back(std::move(f));
    };
    counter(gauges_.resident_spills, "gpuscan_resident_spills_total",
            "Resident arrays spilled to host memory past the budget since the start.");
    counter(gauges_.resident_restores, "gpuscan_resident_restores_total",
            "Spilled resident arrays copied back to the device for a call since the start.");
    counter(gauges_.resident_expired, "gpuscan_resident_expired_total",
            "Resident arrays dropped at the end of their ttl since the start.");
    auto labelled = [&out](const std::function<Metrics::Gauges::Labelled()>& read, const char* name,
                           const char* label, const char* help) {
      if (!read) return;
      auto f = GaugeFamily(name, help);
      for (const auto& [value, n] : read()) AddSample(f, static_cast<double>(n), {{label, value}});
      out.push_back(std::move(f));
    };
    labelled(gauges_.resident_tenant_bytes, "gpuscan_resident_tenant_bytes", "tenant",
             "Each tenant's resident bytes now, on the device and spilled (what --tenant-quota-bytes caps); "
             "tenants with none are left out.");
    labelled(gauges_.resident_device_bytes, "gpuscan_resident_device_bytes", "device",
             "Memory of the resident arrays on each device now (spilled ones left out).");
    labelled(gauges_.resident_device_arrays, "gpuscan_resident_device_arrays", "device",
             "Resident arrays on each device now (spilled ones left out).");
    // One sample per device (a DeviceSet has several). Memory is absent (not 0) when the engine
    // has no device or it cannot be read: 0 would read as "a device with no memory".
    auto used = GaugeFamily("gpuscan_device_memory_used_bytes",
                            "Device memory in use by every process (total - free, as the driver reports it).");
    auto total = GaugeFamily("gpuscan_device_memory_total_bytes", "Device memory in all.");
    auto pool = GaugeFamily("gpuscan_device_memory_pool_bytes",
                            "Device memory the engine's stream-ordered pool holds (in use or cached).");
    auto healthy = GaugeFamily("gpuscan_device_healthy",
                               "1 while the device serves calls; 0 after a fault it cannot recover from.");
    auto calls = GaugeFamily("gpuscan_device_calls", "Calls open on the device now (servers with several devices).");
    for (const engine::DeviceStatus& d : engine_.device_status()) {
      const std::vector<prometheus::ClientMetric::Label> labels = {{"device", d.device}};
      AddSample(healthy, d.healthy ? 1.0 : 0.0, labels);
      if (d.open_sessions) AddSample(calls, static_cast<double>(*d.open_sessions), labels);
      if (!d.memory) continue;
      AddSample(used, static_cast<double>(d.memory->used_bytes), labels);
      AddSample(total, static_cast<double>(d.memory->total_bytes), labels);
      if (d.memory->pool_reserved_bytes) AddSample(pool, static_cast<double>(*d.memory->pool_reserved_bytes), labels);
    }
    for (auto* f : {&used, &total, &pool, &healthy, &calls}) {
      if (!f->metric.empty()) out.push_back(std::move(*f));
    }
    return out;
  }

 private:
  const engine::Engine& engine_;
  const Metrics::Gauges gauges_;
};

}  // namespace

struct Metrics::Impl {
  // Per-op series, found once per call (not per chunk) by CallDone.
  struct OpSeries {
    prometheus::Counter* received = nullptr;
    prometheus::Counter* sent = nullptr;
    std::array<prometheus::Histogram*, kStageCount> stages{};  // each made at its first observation
  };

  std::shared_ptr<prometheus::Registry> registry = std::make_shared<prometheus::Registry>();
  std::shared_ptr<ScrapeTimeGauges> scrape;
  prometheus::Family<prometheus::Counter>& requests;
  prometheus::Family<prometheus::Counter>& received;
  prometheus::Family<prometheus::Counter>& sent;
  prometheus::Family<prometheus::Histogram>& stages;
  prometheus::Gauge& in_flight;
  const prometheus::Histogram::BucketBoundaries buckets = StageBuckets();

  std::mutex mu;
  std::unordered_map<std::string, OpSeries> ops;  // references stay valid as it grows

  Impl(const engine::Engine& engine, const std::string& version, Gauges gauges)
      : scrape(std::make_shared<ScrapeTimeGauges>(engine, std::move(gauges))),
        requests(prometheus::BuildCounter()
                     .Name("gpuscan_requests_total")
                     .Help("Calls finished, by operation, dtype, algorithm that ran, device that ran it and gRPC status code.")
                     .Register(*registry)),
        received(prometheus::BuildCounter()
                     .Name("gpuscan_received_bytes_total")
                     .Help("Payload bytes successful calls received (array data and flags): the sum of "
                           "their Timing.bytes_in.")
                     .Register(*registry)),
        sent(prometheus::BuildCounter()
                 .Name("gpuscan_sent_bytes_total")
                 .Help("Payload bytes successful calls sent (results): the sum of their Timing.bytes_out.")
                 .Register(*registry)),
        stages(prometheus::BuildHistogram()
                   .Name("gpuscan_stage_duration_seconds")
                   .Help("Time successful calls spent per stage: receive, queue (admission), h2d, kernel, "
                         "d2h (engine time summed over chunks), send, total.")
                   .Register(*registry)),
        in_flight(prometheus::BuildGauge()
                      .Name("gpuscan_requests_in_flight")
                      .Help("Calls started and not yet done (queued ones included).")
                      .Register(*registry)
                      .Add({})) {
    prometheus::BuildGauge()
        .Name("gpuscan_info")
        .Help("Always 1; the labels say what this server runs.")
        .Register(*registry)
        .Add({{"version", version}, {"engine", engine.name()}, {"device", engine.device_name()}})
        .Set(1);
  }

  // The op's series, with a histogram for every stage `call` observes. Locked: one hash
  // lookup per call, and calls of the same op may finish at once.
  OpSeries& Series(const CallRecord& call) {
    std::lock_guard<std::mutex> lock(mu);
    OpSeries& s = ops[call.op];
    if (!s.received) {
      s.received = &received.Add({{"op", call.op}});
      s.sent = &sent.Add({{"op", call.op}});
    }
    for (size_t i = 0; i < kStageCount; ++i) {
      if (call.stage_seconds[i] && !s.stages[i]) {
        s.stages[i] = &stages.Add({{"op", call.op}, {"stage", StageName(static_cast<Stage>(i))}}, buckets);
      }
    }
    return s;
  }
};

Metrics::Metrics(const engine::Engine& engine, const std::string& version, Gauges gauges)
    : impl_(std::make_unique<Impl>(engine, version, std::move(gauges))) {}

Metrics::~Metrics() = default;

void Metrics::CallStarted() { impl_->in_flight.Increment(); }

void Metrics::CallDone(const CallRecord& call) {
  impl_->requests
      .Add({{"op", call.op},
            {"dtype", call.dtype},
            {"algorithm", call.algorithm},
            {"device", call.device},
            {"status", call.status}})
      .Increment();
  if (call.status == "OK") {
    Impl::OpSeries& s = impl_->Series(call);
    s.received->Increment(static_cast<double>(call.bytes_in));
    s.sent->Increment(static_cast<double>(call.bytes_out));
    for (size_t i = 0; i < kStageCount; ++i) {
      if (call.stage_seconds[i]) s.stages[i]->Observe(*call.stage_seconds[i]);
    }
  }
  // Last: a scrape that sees in-flight back down also sees everything this call recorded.
  impl_->in_flight.Decrement();
}

std::vector<std::weak_ptr<prometheus::Collectable>> Metrics::collectables() const {
  return {impl_->registry, impl_->scrape};
}

std::string Metrics::Text() const {
  std::vector<prometheus::MetricFamily> families = impl_->registry->Collect();
  for (auto& f : impl_->scrape->Collect()) families.push_back(std::move(f));
  return prometheus::TextSerializer().Serialize(families);
}

std::vector<double> Metrics::StageBuckets() {
  std::vector<double> bounds;
  for (double b = 50e-6; b < 200.0; b *= 2) bounds.push_back(b);  // 50 us ... 104.9 s (22 buckets)
  return bounds;
}

}  // namespace gpuscan::server
