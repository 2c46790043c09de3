// gpuscan::server::Metrics: the server's Prometheus metrics (prometheus-cpp). Handlers report
// each finished call once, as plain strings and numbers (no gRPC types here); gauges that
// describe the present (admission, device memory) are read at scrape time, not kept up to date.
//
// Exported (see the README's Metrics section):
//   gpuscan_requests_total{op,dtype,algorithm,status}   counter
//   gpuscan_received_bytes_total{op}, gpuscan_sent_bytes_total{op}   counters, successful calls
//   gpuscan_stage_duration_seconds{op,stage}   histogram, successful calls
//   gpuscan_requests_in_flight   gauge
//   gpuscan_admission_running, gpuscan_admission_queued   gauges (scrape time)
//   gpuscan_resident_bytes, gpuscan_resident_arrays   gauges (scrape time; with --resident-bytes)
//   gpuscan_resident_spilled_bytes   gauge, gpuscan_resident_spills_total,
//   gpuscan_resident_restores_total   counters (scrape time; with --spill-bytes)
//   gpuscan_resident_expired_total   counter, gpuscan_resident_tenant_bytes{tenant},
//   gpuscan_resident_device_bytes{device}, gpuscan_resident_device_arrays{device}   gauges
//                                     (scrape time; with --resident-bytes)
//   gpuscan_device_memory_used_bytes{device}, gpuscan_device_memory_total_bytes{device},
//   gpuscan_device_memory_pool_bytes{device}   gauges (scrape time; absent without a device)
//   gpuscan_info{version,engine,device}   gauge, always 1
//
// Thread-safe: calls are recorded from gRPC and worker threads while the endpoint scrapes.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/engine.h"

namespace prometheus {
class Collectable;
}

namespace gpuscan::server {

// The stages of a call whose durations are observed (gpuscan_stage_duration_seconds{stage}).
enum class Stage { kReceive, kQueue, kH2d, kKernel, kD2h, kSend, kTotal };
inline constexpr size_t kStageCount = static_cast<size_t>(Stage::kTotal) + 1;
const char* StageName(Stage stage);  // "receive", "queue", "h2d", "kernel", "d2h", "send", "total"

// What one finished call contributes to the metrics.
struct CallRecord {
  std::string op;         // "scan", "reduce", "compact", "benchmark", "transport"
  std::string dtype;      // "int32", ...; "" when the call never got an accepted header
  std::string algorithm;  // the algorithm that ran; "" when the call never reached the engine
  std::string device;     // the device that ran it (Timing.device); "" when it never reached one
  std::string status;     // gRPC code name: "OK", "INVALID_ARGUMENT", ...
  uint64_t bytes_in = 0;   // payload bytes received (Timing.bytes_in)
  uint64_t bytes_out = 0;  // payload bytes sent (Timing.bytes_out)
  // Seconds spent per stage; a stage left empty is not observed (the call had no such stage).
  // Bytes and stages count for successful calls only: see Metrics::CallDone.
  std::array<std::optional<double>, kStageCount> stage_seconds{};

  void set(Stage stage, double seconds) { stage_seconds[static_cast<size_t>(stage)] = seconds; }
};

class Metrics {
 public:
  // Read at scrape time; each may be empty (then its gauge is left out).
  struct Gauges {
    std::function<uint64_t()> admission_running;
    std::function<uint64_t()> admission_queued;
    std::function<uint64_t()> resident_bytes;   // a server with --resident-bytes
    std::function<uint64_t()> resident_arrays;
    std::function<uint64_t()> resident_spilled_bytes;  // a server with --spill-bytes
    std::function<uint64_t()> resident_spills;          // counters: since the start
    std::function<uint64_t()> resident_restores;
    std::function<uint64_t()> resident_expired;  // a server with --resident-bytes
    // Labelled gauges: one sample per label value (tenant, device), read at scrape time.
    using Labelled = std::vector<std::pair<std::string, uint64_t>>;
    std::function<Labelled()> resident_tenant_bytes;
    std::function<Labelled()> resident_device_bytes;
    std::function<Labelled()> resident_device_arrays;
  };

  // `engine` must outlive this object: its name and device label gpuscan_info, and its
  // device_memory() is read at every scrape.
  Metrics(const engine::Engine& engine, const std::string& version, Gauges gauges);
  ~Metrics();
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  // A call began (gpuscan_requests_in_flight + 1). Every CallStarted is followed by one CallDone.
  void CallStarted();
  // A call is over: in flight - 1 and its request counted; when its status is OK, its bytes
  // added and its stage durations observed. Bytes and stages describe served calls only, as
  // Timing does: a failed call's output counts were produced, not necessarily sent, and its
  // fast refusal under overload would pull the latency quantiles down exactly when the server
  // is in trouble. Failures show in gpuscan_requests_total{status}.
  void CallDone(const CallRecord& call);

  // What an exposer serves (all of the metrics above); alive as long as this object.
  std::vector<std::weak_ptr<prometheus::Collectable>> collectables() const;
  // The metrics in Prometheus text format, as /metrics serves them.
  std::string Text() const;

  // The histogram buckets' upper bounds in seconds: 50 us doubling to ~105 s.
  static std::vector<double> StageBuckets();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpuscan::server
