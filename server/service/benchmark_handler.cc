// Benchmark: runs the kernel suite the server was given (ServerOptions::kernel_suite) on its devices
// (BenchmarkRequest.devices, one after the other; the first device by default) and streams each
// row as it is measured.
//
// - The suite runs on a thread of its own, not on the Executor: one run can take minutes and
//   would otherwise hold a compute worker that Scan/Reduce/Compact calls need. gRPC's callback
//   threads never block.
// - One Benchmark per server at a time: a second concurrent call gets RESOURCE_EXHAUSTED at
//   once (rather than waiting), since measurements taken side by side would disturb each other
//   and a client waiting minutes in silence is worse than a clear "busy". It also takes an
//   admission slot like any other call, queueing behind running calls if none is free.
// - Rows are written one at a time; the suite thread waits while kMaxBuffered rows are unsent
//   (back-pressure). Cancellation (or a failed write) makes on_row return false, which stops the
//   suite after the row being measured.
#include <algorithm>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include <spdlog/spdlog.h>

#include "service/call_lifetime.h"
#include "service/handlers.h"
#include "service/kernel_suite.h"
#include "service/streaming_call.h"
#include "service/validate.h"

namespace gpuscan::server {
namespace {

constexpr uint32_t kMaxRepetitions = 10000;
constexpr uint32_t kMaxWarmup = 1000;

// The metrics' record of a Benchmark call: no dtype, algorithm or bytes (one call measures many
// of each); the total time only.
void RecordBenchmarkCall(Metrics* metrics, const grpc::Status& status, Clock::time_point start) {
  CallRecord record;
  record.op = "benchmark";
  record.status = CodeName(status.error_code());
  record.set(Stage::kTotal, std::chrono::duration<double>(Clock::now() - start).count());
  metrics->CallDone(record);
}

// Checks what needs no device: operation names, dtypes, repetition counts. Algorithm names are
// the suite's own vocabulary; it rejects unknown ones with kInvalidArgument.
grpc::Status ValidateBenchmark(const v1::BenchmarkRequest& r) {
  for (int i = 0; i < r.operations_size(); ++i) {
    const std::string& op = r.operations(i);
    static const std::set<std::string> kKnown{"scan",           "reduce",        "compact", "histogram",
                                              "segmented_scan", "reduce_by_key", "sort",    "scan2d",
                                              "pcie"};
    if (kKnown.count(op) == 0) {
      return InvalidArgument("operations[" + std::to_string(i) + "]='" + op +
                             "' is not a known operation (scan, reduce, compact, histogram, segmented_scan, "
                             "reduce_by_key, sort, scan2d, pcie)");
    }
  }
  for (int i = 0; i < r.dtypes_size(); ++i) {
    const int t = r.dtypes(i);
    if (t == v1::DTYPE_UNSPECIFIED || !v1::DType_IsValid(t)) {
      return InvalidArgument("dtypes[" + std::to_string(i) + "]=" + std::to_string(t) +
                             " is not a known DType (INT32, INT64, UINT32, UINT64, FLOAT32, FLOAT64)");
    }
  }
  for (int i = 0; i < r.algorithms_size(); ++i) {
    if (r.algorithms(i).empty()) return InvalidArgument("algorithms[" + std::to_string(i) + "] is empty");
  }
  if (r.repetitions() > kMaxRepetitions) {
    return InvalidArgument("repetitions=" + std::to_string(r.repetitions()) + " exceeds " +
                           std::to_string(kMaxRepetitions));
  }
  if (r.warmup() > kMaxWarmup) {
    return InvalidArgument("warmup=" + std::to_string(r.warmup()) + " exceeds " + std::to_string(kMaxWarmup));
  }
  return grpc::Status::OK;
}

// BenchmarkRequest.devices: ordinals the server serves, each once. Returns them in order, or
// the server's first device when none are named.
grpc::Status ResolveDevices(const v1::BenchmarkRequest& r, const engine::Engine& eng, std::vector<int>* out) {
  const std::vector<engine::DeviceInfo> served = eng.devices();
  std::string list;
  for (const auto& d : served) list += (list.empty() ? "" : ", ") + std::to_string(d.ordinal);
  for (int i = 0; i < r.devices_size(); ++i) {
    const int d = r.devices(i);
    const std::string what = "devices[" + std::to_string(i) + "]=" + std::to_string(d);
    if (std::none_of(served.begin(), served.end(), [&](const engine::DeviceInfo& x) { return x.ordinal == d; })) {
      return InvalidArgument(what + " is not a device this server serves" +
                             (served.empty() ? std::string(" (it serves none: engine ") + eng.name() + ")"
                                             : " (it serves " + list + ")"));
    }
    if (std::find(out->begin(), out->end(), d) != out->end()) return InvalidArgument(what + " is named twice");
    out->push_back(d);
  }
  if (out->empty() && !served.empty()) out->push_back(served[0].ordinal);
  return grpc::Status::OK;
}

// A size whose input and output alone exceed the device's memory cannot run: say so before
// starting (the suite also throws kResourceExhausted for sizes that fail to allocate).
grpc::Status CheckSizesFit(const v1::BenchmarkRequest& r, const engine::Engine& eng) {
  const auto devices = eng.devices();
  if (devices.empty() || devices[0].memory_bytes == 0) return grpc::Status::OK;
  uint64_t memory = devices[0].memory_bytes;  // the smallest device's
  for (const auto& d : devices) memory = std::min(memory, d.memory_bytes);
  uint64_t widest = 8;  // bytes per element of the widest dtype asked for (all: 8)
  if (r.dtypes_size() > 0) {
    widest = 0;
    for (int t : r.dtypes()) {
      engine::DType d;
      if (ToEngineDType(t, &d).ok()) widest = std::max<uint64_t>(widest, engine::SizeOf(d));
    }
  }
  for (int i = 0; i < r.sizes_size(); ++i) {
    const uint64_t n = r.sizes(i);
    if (n == 0) return InvalidArgument("sizes[" + std::to_string(i) + "] is 0; give element counts >= 1");
    if (n > memory / widest / 2) {
      return ResourceExhausted("sizes[" + std::to_string(i) + "]=" + std::to_string(n) + " elements of " +
                               std::to_string(widest) + " bytes need at least " +
                               std::to_string(n / 1048576 * widest * 2) + " MiB (input and output); the device has " +
                               std::to_string(memory >> 20) + " MiB");
    }
  }
  return grpc::Status::OK;
}

class BenchmarkCall final : public grpc::ServerWriteReactor<v1::BenchmarkRow>, CallLifetime {
  static constexpr size_t kMaxBuffered = 16;  // rows measured but not yet sent

 public:
  BenchmarkCall(CallContext ctx, const v1::BenchmarkRequest& request, std::vector<int> devices)
      : CallLifetime(ctx.admission), ctx_(std::move(ctx)), request_(request), devices_(std::move(devices)),
        several_(ctx_.engine->devices().size() > 1), start_(Clock::now()) {
    ctx_.metrics->CallStarted();
  }

  // The call already owns ctx_.benchmark_running; asks for an admission slot.
  void Begin() {
    std::unique_lock<std::mutex> lock(mu_);
    switch (TryAdmitLocked(0, [this] { OnAdmitted(); })) {
      case Admission::Result::kAdmitted:
        return StartSuiteLocked();
      case Admission::Result::kQueued:
        return;
      case Admission::Result::kRejected:
        break;
    }
    stopped_ = true;
    ctx_.benchmark_running->store(false);
    status_ = ResourceExhausted("server busy: " + std::to_string(ctx_.options->max_concurrent) + " calls running and " +
                                std::to_string(ctx_.options->max_queued) + " waiting; retry later");
    MaybeFinish(lock);
  }

  void OnWriteDone(bool ok) override {
    std::unique_lock<std::mutex> lock(mu_);
    writing_ = false;
    outgoing_.pop_front();
    if (!ok) {
      stop_ = true;
      if (status_.ok()) status_ = {grpc::StatusCode::CANCELLED, "the client stopped receiving"};
      outgoing_.clear();
    }
    cv_.notify_all();
    MaybeWriteLocked();
    MaybeFinish(lock);
  }

  void OnCancel() override {
    std::unique_lock<std::mutex> lock(mu_);
    stop_ = true;
    if (status_.ok()) status_ = {grpc::StatusCode::CANCELLED, "the call was cancelled"};
    if (!writing_) outgoing_.clear();
    if (CancelQueuedLocked()) {
      // Still waiting for a slot: the suite never starts, so finish now.
      stopped_ = true;
      ctx_.benchmark_running->store(false);
    }
    cv_.notify_all();
    MaybeFinish(lock);
  }

  void OnDone() override {
    spdlog::info("benchmark rows={} status={}{}{} total_us={}", rows_, CodeName(status_.error_code()),
                 status_.ok() ? "" : " message=\"", status_.ok() ? "" : status_.error_message() + "\"",
                 Micros(Clock::now() - start_));
    RecordBenchmarkCall(ctx_.metrics, status_, start_);
    std::unique_lock<std::mutex> lock(mu_);
    if (CancelQueuedLocked()) {
      // Never admitted, so the suite never started: the Benchmark flag is still ours.
      ctx_.benchmark_running->store(false);
    }
    DoneLocked(lock);
  }

 private:
  void OnAdmitted() {
    std::unique_lock<std::mutex> lock(mu_);
    AdmittedLocked();
    if (stop_) {
      stopped_ = true;
      ctx_.benchmark_running->store(false);
      return MaybeFinish(lock);
    }
    StartSuiteLocked();
  }

  void StartSuiteLocked() {
    ++refs_;  // the suite thread's
    std::thread([this] { RunSuite(); }).detach();
  }

  // Suite thread.
  void RunSuite() {
    grpc::Status status;
    try {
      for (const int device : devices_) {  // one after the other: side by side they would disturb each other
        bool go_on = true;
        ctx_.options->kernel_suite->Run(request_, device, [&](v1::BenchmarkRow row) {
          return go_on = OnRow(std::move(row), device);
        });
        if (!go_on) break;
      }
    } catch (...) {
      status = StatusFromException(std::current_exception());
    }
    if (!status.ok() && ctx_.on_engine_failure) ctx_.on_engine_failure();
    ctx_.benchmark_running->store(false);
    std::unique_lock<std::mutex> lock(mu_);
    if (status_.ok()) status_ = status;
    stopped_ = true;
    --refs_;
    MaybeFinish(lock);
  }

  // Suite thread: queues one row; false stops the suite.
  bool OnRow(v1::BenchmarkRow wire, int device) {
    if (several_) wire.set_device(std::to_string(device) + ": " + wire.device());  // as Timing.device names it
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return stop_ || outgoing_.size() < kMaxBuffered; });
    if (stop_) return false;
    outgoing_.push_back(std::move(wire));
    ++rows_;
    MaybeWriteLocked();
    return true;
  }

  void MaybeWriteLocked() {
    if (writing_ || outgoing_.empty() || stop_) return;
    writing_ = true;
    StartWrite(&outgoing_.front());
  }

  // Finishes once the suite has stopped and every row is out. Releases the lock.
  void MaybeFinish(std::unique_lock<std::mutex>& lock) {
    FinishOnceOrRelease(lock, stopped_ && !writing_ && (outgoing_.empty() || stop_), finished_,
                        [this, status = status_] { Finish(status); });
  }

  CallContext ctx_;
  const v1::BenchmarkRequest request_;
  const std::vector<int> devices_;  // ordinals to measure, in order
  const bool several_;              // the server serves several devices: rows say which
  const Clock::time_point start_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<v1::BenchmarkRow> outgoing_;
  grpc::Status status_;
  uint64_t rows_ = 0;
  bool writing_ = false;
  bool stop_ = false;     // cancelled or a write failed: the suite must stop
  bool stopped_ = false;  // the suite is over (or never started)
  bool finished_ = false;
};


// A reactor that only finishes with `status` (for refusals before any work).
grpc::ServerWriteReactor<v1::BenchmarkRow>* Refuse(Metrics* metrics, grpc::Status status) {
  class Refusal final : public grpc::ServerWriteReactor<v1::BenchmarkRow> {
   public:
    Refusal(Metrics* metrics, const grpc::Status& s) : metrics_(metrics), status_(s), start_(Clock::now()) {
      metrics_->CallStarted();
      Finish(s);
    }
    void OnDone() override {
      RecordBenchmarkCall(metrics_, status_, start_);
      delete this;
    }

   private:
    Metrics* const metrics_;
    const grpc::Status status_;
    const Clock::time_point start_;
  };
  spdlog::info("benchmark status={} message=\"{}\"", CodeName(status.error_code()), status.error_message());
  return new Refusal(metrics, status);
}

}  // namespace

grpc::ServerWriteReactor<v1::BenchmarkRow>* StartBenchmark(CallContext ctx, const v1::BenchmarkRequest* request) {
  if (auto s = ValidateBenchmark(*request); !s.ok()) return Refuse(ctx.metrics, s);
  std::vector<int> devices;
  if (auto s = ResolveDevices(*request, *ctx.engine, &devices); !s.ok()) return Refuse(ctx.metrics, s);
  if (ctx.engine->name() != "cuda") {
    return Refuse(ctx.metrics, {grpc::StatusCode::FAILED_PRECONDITION,
                                "Benchmark needs the cuda engine; this server runs " + ctx.engine->name()});
  }
  if (!ctx.options->kernel_suite) {
    return Refuse(ctx.metrics,
                  {grpc::StatusCode::FAILED_PRECONDITION,
                   "Benchmark needs the kernel suite, and this server was built without it (no gpuscan_bench)"});
  }
  if (!ctx.engine->healthy()) return Refuse(ctx.metrics, EngineUnavailable(*ctx.engine));
  if (auto s = CheckSizesFit(*request, *ctx.engine); !s.ok()) return Refuse(ctx.metrics, s);
  if (ctx.benchmark_running->exchange(true)) {
    return Refuse(ctx.metrics, ResourceExhausted("a Benchmark is already running on this server; one runs at a "
                                                 "time, retry when it has finished"));
  }
  return StartCall<BenchmarkCall>(std::move(ctx), *request, std::move(devices));
}

}  // namespace gpuscan::server
