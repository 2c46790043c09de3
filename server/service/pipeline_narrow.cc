#include "service/pipeline_narrow.h"

#include <algorithm>
#include <cstring>
#include <memory>

#include "service/resident_narrow.h"
#include "service/validate.h"

namespace gpuscan::server {
namespace {

// The dtype the stage's engine computes in: its values input widened into it.
engine::DType NarrowEngineDType(const StagePlan& p) {
  switch (p.op) {
    case StageOp::kScan: return p.scan.dtype;
    case StageOp::kReduce: return p.reduce.dtype;
    case StageOp::kCompact: return p.compact.dtype;
    case StageOp::kHistogram: return p.histogram.dtype;
    case StageOp::kSort: return p.sort.dtype;
    case StageOp::kSegmentedScan: return p.segmented.dtype;
    default: break;  // no other stage takes narrow inputs
  }
  return p.scan.dtype;
}

// `in`, narrow, as a new array of `engine` elements beside it.
grpc::Status WidenedInput(const StageEnv& env, const StagePlan& plan, const StageArrayRef& in,
                          const NarrowInput& narrow, engine::DType engine, StageArrayRef* out) {
  out->held = in.held;
  out->dtype = ToWire(engine);
  out->count = in.count;
  auto s = WidenResident(env.store, env.tenant, *in.memory, narrow, engine, in.count, env.chunk_bytes, &out->memory);
  return Renamed(s, plan.field);
}

// A made array of `engine` elements replaced by its narrow one (of exactly its count).
grpc::Status NarrowedMade(const StageEnv& env, const StagePlan& plan, const NarrowInput& narrow, engine::DType engine,
                          StageArrayRef* made) {
  if (!*made) return grpc::Status::OK;
  std::shared_ptr<engine::ResidentMemory> m;
  const uint64_t bytes = std::max<uint64_t>(made->count * narrow.size, 1);
  if (auto s = env.store.Allocate(env.tenant, bytes, &m, made->memory.get()); !s.ok()) return Renamed(s, plan.field);
  NarrowInto(*made->memory, narrow, engine, made->count, *m, env.chunk_bytes);
  made->memory = std::move(m);
  made->dtype = narrow.wire;
  return grpc::Status::OK;
}

// A Reduce's float32 value rounded once to FLOAT16, as reduce_handler.cc answers it.
void HalfValue(v1::ReduceResponse* r) {
  float f = 0;
  std::memcpy(&f, r->raw_value().data(), sizeof f);
  const uint16_t h = FloatToHalf(f);
  r->set_raw_value(&h, sizeof h);
  r->mutable_value()->set_float_value(HalfToFloat(h));
}

}  // namespace

grpc::Status RunNarrowStage(const StageEnv& env, const StagePlan& plan, const StageArrayRef& values,
                            const StageArrayRef& flags, const StageArrayRef& keys, const StageArrayRef& sort_values,
                            StageOutcome* outcome) {
  StagePlan wide = plan;
  wide.narrow.reset();
  wide.narrow_sort_values.reset();
  const engine::DType dtype = NarrowEngineDType(plan);
  StageArrayRef v = values, sv = sort_values;
  if (plan.narrow) {
    if (auto s = WidenedInput(env, plan, values, *plan.narrow, dtype, &v); !s.ok()) return s;
  }
  if (plan.narrow_sort_values && sort_values) {
    if (auto s = WidenedInput(env, plan, sort_values, *plan.narrow_sort_values, plan.sort.values_dtype, &sv); !s.ok()) {
      return s;
    }
  }
  if (auto s = RunStage(env, wide, v, flags, keys, sv, outcome); !s.ok()) return s;
  v = {};  // the widened inputs go before the narrowed results are made
  sv = {};
  auto& made = outcome->made;
  switch (plan.op) {
    case StageOp::kScan:
    case StageOp::kSegmentedScan:
      if (plan.narrow && plan.narrow->half_out) {
        return NarrowedMade(env, plan, *plan.narrow, dtype, &made[v1::STAGE_ARRAY_VALUES]);
      }
      return grpc::Status::OK;
    case StageOp::kReduce:
      if (plan.narrow && plan.narrow->half_out) HalfValue(outcome->final.mutable_reduce());
      return grpc::Status::OK;
    case StageOp::kCompact:
      return NarrowedMade(env, plan, *plan.narrow, dtype, &made[v1::STAGE_ARRAY_VALUES]);
    case StageOp::kSort:
      if (plan.narrow) {
        if (auto s = NarrowedMade(env, plan, *plan.narrow, dtype, &made[v1::STAGE_ARRAY_VALUES]); !s.ok()) return s;
      }
      if (plan.narrow_sort_values) {
        return NarrowedMade(env, plan, *plan.narrow_sort_values, plan.sort.values_dtype,
                            &made[v1::STAGE_ARRAY_SORT_VALUES]);
      }
      return grpc::Status::OK;
    default:
      return grpc::Status::OK;  // Histogram: counts only
  }
}

}  // namespace gpuscan::server
