#include "service/pipeline_stages.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "engine/histogram.h"
#include "service/pipeline_narrow.h"
#include "service/status.h"
#include "service/validate.h"

namespace gpuscan::server {
namespace {

using Clock = std::chrono::steady_clock;

// What one stage run needs besides its inputs: where it computes and its Timing.
class StageRun {
 public:
  StageRun(const StageEnv& env, const StagePlan& plan, const StageArrayRef& values, StageOutcome* outcome)
      : env_(env), plan_(plan), values_(values), outcome_(outcome), engine_(*values.memory->engine),
        start_(Clock::now()) {}

  // A session of the engine the values lie on, named after their device.
  template <class S>
  std::unique_ptr<S> Placed(std::unique_ptr<S> session) const {
    if (!values_.memory->device.empty()) session->Place(values_.memory->device);
    return session;
  }
  engine::Engine& engine() const { return engine_; }
  uint64_t n() const { return values_.count; }
  engine::StageTimes& times() { return outcome_->times; }

  // The made array `array` of `count` elements of `dtype`, counted against the budget.
  grpc::Status Make(int array, int dtype, uint64_t count) {
    StageArrayRef& out = outcome_->made[array];
    const uint64_t bytes = std::max<uint64_t>(count * WireDTypeSize(dtype), 1);
    if (auto s = env_.store.Allocate(env_.tenant, bytes, &out.memory, values_.memory.get()); !s.ok()) {
      return Renamed(s, plan_.field);
    }
    out.dtype = dtype;
    out.count = count;
    return grpc::Status::OK;
  }
  std::byte* MadeData(int array) const {
    const StageArrayRef& a = outcome_->made[array];
    return a ? a.memory->data() : nullptr;
  }

  // The stage's Timing: engine stage times, wall time, where it ran and what.
  void FillTiming(v1::Timing* t, const std::string& algorithm) const {
    t->set_h2d_us(outcome_->times.h2d_us);
    t->set_kernel_us(outcome_->times.kernel_us);
    t->set_d2h_us(outcome_->times.d2h_us);
    t->set_total_us(static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start_).count()));
    t->set_engine(engine_.name());
    t->set_device(values_.memory->device.empty() ? engine_.device_name() : values_.memory->device);
    t->set_algorithm(algorithm);
    t->set_chunks(1);
  }

 private:
  const StageEnv& env_;
  const StagePlan& plan_;
  const StageArrayRef& values_;
  StageOutcome* outcome_;
  engine::Engine& engine_;
  Clock::time_point start_;
};

grpc::Status SameLength(const StagePlan& plan, const StageArrayRef& values, const StageArrayRef& other,
                        const StageSource& src) {
  if (!other || other.count == values.count) return grpc::Status::OK;
  return InvalidArgument(fmt::format("{}: {} elements; the stage's values ({}) have {}", src.field, other.count,
                                     plan.values.field, values.count));
}

grpc::Status Scan(const StagePlan& plan, StageRun& run, const StageArrayRef& values, StageOutcome* o) {
  auto session = run.Placed(run.engine().NewScan(plan.scan));
  if (auto s = run.Make(v1::STAGE_ARRAY_VALUES, values.dtype, run.n()); !s.ok()) return s;
  session->ProcessDevice(values.memory->data(), run.MadeData(v1::STAGE_ARRAY_VALUES), run.n(), run.times());
  v1::ScanResponse* r = o->final.mutable_scan();
  r->set_element_count(run.n());
  run.FillTiming(r->mutable_timing(), session->algorithm());
  return grpc::Status::OK;
}

grpc::Status Reduce(const StagePlan& plan, StageRun& run, const StageArrayRef& values, StageOutcome* o) {
  auto session = run.Placed(run.engine().NewReduce(plan.reduce));
  session->ProcessDevice(values.memory->data(), run.n(), run.times());
  unsigned char value[8] = {};
  session->Result(value);
  v1::ReduceResponse* r = o->final.mutable_reduce();
  *r->mutable_value() = ElementToScalar(value, plan.reduce.dtype);
  r->set_raw_value(value, engine::SizeOf(plan.reduce.dtype));
  r->set_element_count(run.n());
  run.FillTiming(r->mutable_timing(), session->algorithm());
  return grpc::Status::OK;
}

grpc::Status Compact(const StagePlan& plan, StageRun& run, const StageArrayRef& values, const StageArrayRef& flags,
                     StageOutcome* o) {
  auto session = run.Placed(run.engine().NewCompact(plan.compact));
  // Room for every element (the kept count is known only after); the made arrays say how many.
  if (plan.compact.want_values) {
    if (auto s = run.Make(v1::STAGE_ARRAY_VALUES, values.dtype, run.n()); !s.ok()) return s;
  }
  if (plan.compact.want_indices) {
    if (auto s = run.Make(v1::STAGE_ARRAY_INDICES, v1::DTYPE_INT64, run.n()); !s.ok()) return s;
  }
  const auto* f = flags ? reinterpret_cast<const uint8_t*>(flags.memory->data()) : nullptr;
  const uint64_t kept = session->ProcessDevice(values.memory->data(), f, run.n(), run.MadeData(v1::STAGE_ARRAY_VALUES),
                                               reinterpret_cast<int64_t*>(run.MadeData(v1::STAGE_ARRAY_INDICES)),
                                               run.times());
  for (StageArrayRef& a : o->made) {
    if (a) a.count = kept;
  }
  v1::CompactResponse* r = o->final.mutable_compact();
  r->set_kept_count(kept);
  r->set_element_count(run.n());
  run.FillTiming(r->mutable_timing(), session->algorithm());
  return grpc::Status::OK;
}

grpc::Status Histogram(const StagePlan& plan, StageRun& run, const StageArrayRef& values, StageOutcome* o) {
  auto session = run.Placed(run.engine().NewHistogram(plan.histogram));
  session->ProcessDevice(values.memory->data(), run.n(), run.times());
  const std::vector<uint64_t> slots = session->Result();
  const std::vector<double>& edges = plan.histogram.edges;
  const size_t bins = edges.size() - 1;
  v1::HistogramResponse* r = o->final.mutable_histogram();
  r->set_counts(slots.data(), bins * sizeof(uint64_t));
  r->set_edges(edges.data(), edges.size() * sizeof(double));
  r->set_below(slots[bins + engine::kHistogramBelow]);
  r->set_above(slots[bins + engine::kHistogramAbove]);
  r->set_nan_count(slots[bins + engine::kHistogramNan]);
  r->set_element_count(run.n());
  run.FillTiming(r->mutable_timing(), session->algorithm());
  return grpc::Status::OK;
}

grpc::Status Sort(const StagePlan& plan, StageRun& run, const StageArrayRef& keys, const StageArrayRef& values,
                  StageOutcome* o) {
  const engine::SortSpec& spec = plan.sort;
  // Never in place: the inputs stay as they are (a resident array, or an array a later stage reads).
  if (spec.want_keys) {
    if (auto s = run.Make(v1::STAGE_ARRAY_VALUES, keys.dtype, run.n()); !s.ok()) return s;
  }
  if (spec.has_values) {
    if (auto s = run.Make(v1::STAGE_ARRAY_SORT_VALUES, values.dtype, run.n()); !s.ok()) return s;
  }
  if (spec.want_indices) {
    if (auto s = run.Make(v1::STAGE_ARRAY_INDICES, v1::DTYPE_INT64, run.n()); !s.ok()) return s;
  }
  auto session = run.Placed(run.engine().NewSort(spec));
  session->Run(keys.memory->data(), values ? values.memory->data() : nullptr, run.n(),
               run.MadeData(v1::STAGE_ARRAY_VALUES), run.MadeData(v1::STAGE_ARRAY_SORT_VALUES),
               reinterpret_cast<int64_t*>(run.MadeData(v1::STAGE_ARRAY_INDICES)), run.times());
  v1::SortResponse* r = o->final.mutable_sort();
  r->set_element_count(run.n());
  run.FillTiming(r->mutable_timing(), session->algorithm());
  return grpc::Status::OK;
}

// On the device path where the session has one (a call of n = 0 throws kUnimplemented where it
// has not: float SUM/PRODUCT, the cpu engine); else from host memory a piece at a time through the
// session's streamed Process, bit for bit the streamed call's (segmented_scan_handler.cc does the same).
grpc::Status SegmentedScan(const StageEnv& env, const StagePlan& plan, StageRun& run, const StageArrayRef& values,
                           const StageArrayRef& segments, StageOutcome* o) {
  auto session = run.Placed(run.engine().NewSegmentedScan(plan.segmented));
  if (auto s = run.Make(v1::STAGE_ARRAY_VALUES, values.dtype, run.n()); !s.ok()) return s;
  bool device_path = true;
  try {
    session->ProcessDevice(nullptr, nullptr, nullptr, 0, run.times());
  } catch (const engine::Error& e) {
    if (e.code() != engine::ErrorCode::kUnimplemented) throw;
    device_path = false;
  }
  engine::ResidentMemory& out = *o->made[v1::STAGE_ARRAY_VALUES].memory;
  if (device_path) {
    session->ProcessDevice(values.memory->data(), segments.memory->data(), out.data(), run.n(), run.times());
  } else {
    const size_t vsize = WireDTypeSize(values.dtype);
    const size_t ksize = WireDTypeSize(segments.dtype);
    const uint64_t step = std::max<uint64_t>(1, env.chunk_bytes / std::max(vsize, ksize));
    std::vector<std::byte> in(step * vsize), keys(step * ksize), result(step * vsize);
    for (uint64_t first = 0; first < run.n(); first += step) {
      const uint64_t m = std::min(step, run.n() - first);
      values.memory->Read(first * vsize, in.data(), m * vsize);
      segments.memory->Read(first * ksize, keys.data(), m * ksize);
      session->Process(in.data(), keys.data(), result.data(), m, run.times());
      out.Write(first * vsize, result.data(), m * vsize);
    }
  }
  v1::ScanResponse* r = o->final.mutable_scan();
  r->set_element_count(run.n());
  run.FillTiming(r->mutable_timing(), session->algorithm());
  return grpc::Status::OK;
}

}  // namespace

grpc::Status RunStage(const StageEnv& env, const StagePlan& plan, const StageArrayRef& values,
                      const StageArrayRef& flags, const StageArrayRef& keys, const StageArrayRef& sort_values,
                      StageOutcome* outcome) {
  if (plan.narrow || plan.narrow_sort_values) {  // widened, run here, narrowed back
    return RunNarrowStage(env, plan, values, flags, keys, sort_values, outcome);
  }
  if (plan.declared && *plan.declared != values.count) {
    return InvalidArgument(fmt::format("{}.element_count {} differs from its values' {} elements ({})", plan.field,
                                       *plan.declared, values.count, plan.values.field));
  }
  if (auto s = SameLength(plan, values, flags, plan.flags); !s.ok()) return s;
  if (auto s = SameLength(plan, values, keys, plan.keys); !s.ok()) return s;
  if (auto s = SameLength(plan, values, sort_values, plan.sort_values); !s.ok()) return s;
  for (const StageArrayRef* other : {&flags, &keys, &sort_values}) {
    if (*other && other->memory->engine != values.memory->engine) {
      return InvalidArgument(fmt::format("{}: its inputs lie on devices '{}' and '{}': one stage reads one device",
                                         plan.field, values.memory->device, other->memory->device));
    }
  }
  StageRun run(env, plan, values, outcome);
  try {
    switch (plan.op) {
      case StageOp::kScan: return Scan(plan, run, values, outcome);
      case StageOp::kReduce: return Reduce(plan, run, values, outcome);
      case StageOp::kCompact: return Compact(plan, run, values, flags, outcome);
      case StageOp::kHistogram: return Histogram(plan, run, values, outcome);
      case StageOp::kSort: return Sort(plan, run, values, sort_values, outcome);
      case StageOp::kSegmentedScan: return SegmentedScan(env, plan, run, values, keys ? keys : flags, outcome);
    }
  } catch (const engine::Error& e) {
    // What the input causes is the caller's, named by stage; a device fault goes to the call.
    if (e.code() == engine::ErrorCode::kInternal || e.code() == engine::ErrorCode::kUnavailable) throw;
    return Renamed(ToStatus(e), plan.field);
  }
  return grpc::Status::OK;
}

grpc::Status CutToCount(const StageEnv& env, const StagePlan& plan, StageArrayRef* array) {
  const uint64_t bytes = std::max<uint64_t>(array->count * WireDTypeSize(array->dtype), 1);
  if (array->memory->bytes() == bytes) return grpc::Status::OK;
  std::shared_ptr<engine::ResidentMemory> cut;
  if (auto s = env.store.Allocate(env.tenant, bytes, &cut, array->memory.get()); !s.ok()) return Renamed(s, plan.field);
  if (array->count > 0) array->memory->CopyTo(0, *cut, 0, bytes);
  array->memory = std::move(cut);
  return grpc::Status::OK;
}

}  // namespace gpuscan::server
