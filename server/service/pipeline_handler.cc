// Pipeline: bidirectional streaming. The header (its stages checked whole: pipeline_plan.h, and its
// resident inputs found and held), then, with header.input, the streamed input's chunks, written
// into memory where the engine computes as PutArray writes them. Once it has all arrived the
// stages run in order (pipeline_stages.h), each array a stage makes freed after its last reader;
// only when every stage has run are kept arrays registered and results sent, stage by stage.
#include <algorithm>
#include <array>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "service/handlers.h"
#include "service/pipeline_plan.h"
#include "service/pipeline_stages.h"
#include "service/resident_call.h"
#include "service/resident_store.h"
#include "service/status.h"
#include "service/streaming_call.h"

namespace gpuscan::server {
namespace {

class PipelineCall final
    : public StreamingCall<v1::PipelineRequest, v1::PipelineResponse,
                           grpc::ServerBidiReactor<v1::PipelineRequest, v1::PipelineResponse>> {
 public:
  PipelineCall(CallContext ctx, grpc::CallbackServerContext* rpc, const char* name)
      : StreamingCall(std::move(ctx), rpc, name), checks_(*ctx_.resident, ctx_.options->chunk_bytes) {}

 protected:
  grpc::Status OnHeader(const v1::PipelineHeader& header) override {
    if (auto s = ctx_.resident->CheckServed(); !s.ok()) return s;
    if (auto s = PlanPipeline(header, *ctx_.engine, &plan_); !s.ok()) return s;
    if (plan_.streamed) {
      if (auto s = checks_.Header(header.input(), *rpc_, &tenant_); !s.ok()) return InputRenamed(s);
    } else if (auto s = TenantOf(*rpc_, &tenant_); !s.ok()) {
      return s;
    }
    return FindResident();
  }

  grpc::Status CheckRequest(const v1::PipelineRequest& req, uint64_t index) override {
    if (!plan_.streamed) {
      if (req.data().empty()) return grpc::Status::OK;
      return InvalidArgument(fmt::format("request #{}: data, but the pipeline has no streamed input (header.input)",
                                         index));
    }
    return InputRenamed(checks_.Chunk(req.data().size(), index));
  }

  bool HeaderEndsStream() const override { return !plan_.streamed; }
  void ReleaseHeld() override {
    resident_.clear();
    input_ = {};
    held_.clear();
  }

  void Open() override {
    if (!plan_.streamed || !checks_.header().has_element_count()) return;
    const uint64_t bytes = checks_.header().element_count() * checks_.element_size();
    if (auto s = ctx_.resident->Allocate(tenant_, std::max<uint64_t>(bytes, 1), &input_.memory); !s.ok()) {
      throw engine::Error(engine::ErrorCode::kResourceExhausted, "header.input: " + s.error_message());
    }
  }

  void Process(v1::PipelineRequest& req, std::vector<v1::PipelineResponse>&) override {
    const uint64_t bytes = req.data().size();
    if (bytes == 0) return;
    if (input_.memory) {
      input_.memory->Write(written_, req.data().data(), bytes);
    } else {
      held_.push_back(std::move(*req.mutable_data()));
    }
    written_ += bytes;
    bytes_in_ += bytes;
    ++chunks_;
  }

  grpc::Status Complete(std::vector<v1::PipelineResponse>& out) override {
    if (plan_.streamed) {
      if (auto s = TakeInput(); !s.ok()) return s;
    }
    const Clock::time_point run_start = Clock::now();
    const StageEnv env{*ctx_.resident, tenant_, ctx_.options->chunk_bytes};
    const size_t count = plan_.stages.size();
    std::vector<StageOutcome> outcomes(count);
    for (size_t i = 0; i < count; ++i) {
      if (Cancelled()) return {grpc::StatusCode::CANCELLED, "the call was cancelled"};
      const StagePlan& p = plan_.stages[i];
      std::array<StageArrayRef, 4> in;
      for (size_t k = 0; k < in.size(); ++k) in[k] = Input(*p.inputs()[k], i, k, outcomes);
      if (auto s = RunStage(env, p, in[0], in[1], in[2], in[3], &outcomes[i]); !s.ok()) return s;
      stages_.h2d_us += outcomes[i].times.h2d_us;
      stages_.kernel_us += outcomes[i].times.kernel_us;
      stages_.d2h_us += outcomes[i].times.d2h_us;
      algorithms_ += (i ? "," : "") + Algorithm(outcomes[i].final);
      const Clock::time_point free_start = Clock::now();
      FreeRead(i, outcomes);
      free_us_ += Micros(Clock::now() - free_start);
    }
    input_ = {};
    resident_.clear();
    if (auto s = Keep(env, outcomes); !s.ok()) return s;
    for (size_t i = 0; i < count; ++i) {
      if (plan_.stages[i].returns == v1::STAGE_RETURN_DATA) ReturnData(i, outcomes[i], out);
      v1::PipelineResponse& final = out.emplace_back();
      final = std::move(outcomes[i].final);
      final.set_stage(static_cast<uint32_t>(i));
      outcomes[i] = {};
    }
    run_us_ = Micros(Clock::now() - run_start);
    v1::PipelineResponse& last = out.emplace_back();
    last.set_stage(static_cast<uint32_t>(count));
    FillTiming(last.mutable_timing(), algorithms_);
    return grpc::Status::OK;
  }

  std::string LogFields() const override {
    std::string ops;
    for (const StagePlan& p : plan_.stages) ops += (ops.empty() ? "" : ",") + std::string(StageOpName(p.op));
    // run_us: the stages and the responses' making; free_us: of that, freeing what was read.
    return fmt::format("stages={} ops={} streamed_bytes={} algorithms={} run_us={} free_us={} engine={}",
                       plan_.stages.size(), ops, written_, algorithms_, run_us_, free_us_, ctx_.engine->name());
  }

  MetricLabels Labels() const override { return {"", algorithms_, ""}; }

 private:
  // The stages' resident inputs: found (renewed, restored if spilled) and held, of the dtype the
  // stage needs and, for values, header.element_count's count.
  grpc::Status FindResident() {
    resident_.assign(plan_.stages.size(), {});
    for (size_t i = 0; i < plan_.stages.size(); ++i) {
      const StagePlan& p = plan_.stages[i];
      for (size_t k = 0; k < 4; ++k) {
        const StageSource& src = *p.inputs()[k];
        if (src.kind != StageSource::Kind::kResident) continue;
        std::shared_ptr<const ResidentArray>& a = resident_[i][k];
        if (auto s = ctx_.resident->Find(tenant_, src.id, src.field + ".id", &a); !s.ok()) return s;
        const bool flags = &src == &p.flags;
        if (flags ? WireDTypeSize(a->dtype) != 1 : a->dtype != src.dtype) {
          return InvalidArgument(fmt::format("{}.id {} is {}; this input must be {}", src.field, HexText(a->id),
                                             DTypeText(a->dtype),
                                             flags ? std::string("UINT8 or INT8") : DTypeText(src.dtype)));
        }
      }
    }
    return grpc::Status::OK;
  }

  // The streamed input, all arrived: checked, and in memory where the engine computes.
  grpc::Status TakeInput() {
    if (auto s = checks_.Finish(written_); !s.ok()) return InputRenamed(s);
    if (!input_.memory) {
      if (auto s = ctx_.resident->Allocate(tenant_, std::max<uint64_t>(written_, 1), &input_.memory); !s.ok()) {
        return Renamed(s, "header.input");
      }
      uint64_t at = 0;
      for (const std::string& chunk : held_) {
        input_.memory->Write(at, chunk.data(), chunk.size());
        at += chunk.size();
      }
      held_.clear();
    }
    input_.dtype = checks_.header().dtype();
    input_.count = written_ / checks_.element_size();
    return grpc::Status::OK;
  }

  StageArrayRef Input(const StageSource& src, size_t stage, size_t slot, const std::vector<StageOutcome>& outcomes) {
    StageArrayRef r;
    switch (src.kind) {
      case StageSource::Kind::kNone: break;
      case StageSource::Kind::kStreamed: r = input_; break;
      case StageSource::Kind::kStage: r = outcomes[src.stage].made[src.array]; break;
      case StageSource::Kind::kResident: {
        const auto& a = resident_[stage][slot];
        r.memory = a->memory;
        r.dtype = a->dtype;
        r.count = a->count;
        r.held = a;
        break;
      }
    }
    return r;
  }

  // After stage i: the arrays no later stage reads and no one returns or keeps go.
  void FreeRead(size_t i, std::vector<StageOutcome>& outcomes) const {
    for (size_t j = 0; j <= i; ++j) {
      const StagePlan& p = plan_.stages[j];
      if (p.returns != v1::STAGE_RETURN_NONE) continue;
      for (int a = 0; a < kStageArrays; ++a) {
        if (p.last_reader[a] <= static_cast<int>(i)) outcomes[j].made[a] = {};
      }
    }
  }

  // Every kept array cut to its size first, then all registered: a refusal keeps none.
  grpc::Status Keep(const StageEnv& env, std::vector<StageOutcome>& outcomes) const {
    for (size_t i = 0; i < outcomes.size(); ++i) {
      if (plan_.stages[i].returns != v1::STAGE_RETURN_KEEP) continue;
      for (StageArrayRef& a : outcomes[i].made) {
        if (!a) continue;
        if (auto s = CutToCount(env, plan_.stages[i], &a); !s.ok()) return s;
      }
    }
    for (size_t i = 0; i < outcomes.size(); ++i) {
      const StagePlan& p = plan_.stages[i];
      if (p.returns != v1::STAGE_RETURN_KEEP) continue;
      for (int a = 0; a < kStageArrays; ++a) {
        StageArrayRef& made = outcomes[i].made[a];
        if (!made) continue;
        *KeptInfo(&outcomes[i].final, a) =
            env.store.Add(tenant_, made.dtype, made.count, std::move(made.memory), p.ttl_ms, p.label);
        made = {};
      }
    }
    return grpc::Status::OK;
  }

  // Where a kept array's info goes in its stage's final response.
  static v1::ArrayInfo* KeptInfo(v1::PipelineResponse* r, int array) {
    if (r->has_compact()) {
      return array == v1::STAGE_ARRAY_VALUES ? r->mutable_compact()->mutable_values_array()
                                             : r->mutable_compact()->mutable_indices_array();
    }
    if (r->has_sort()) {
      return array == v1::STAGE_ARRAY_VALUES    ? r->mutable_sort()->mutable_keys_array()
             : array == v1::STAGE_ARRAY_INDICES ? r->mutable_sort()->mutable_indices_array()
                                                : r->mutable_sort()->mutable_values_array();
    }
    return r->mutable_scan()->mutable_array();
  }

  // A returned stage's arrays, read back in responses of its operation's type as its own RPC
  // sends them: pieces of whole elements, no field above the chunk size.
  void ReturnData(size_t i, const StageOutcome& o, std::vector<v1::PipelineResponse>& out) {
    size_t widest = 1;
    uint64_t count = 0;
    for (const StageArrayRef& a : o.made) {
      if (!a) continue;
      widest = std::max(widest, WireDTypeSize(a.dtype));
      count = a.count;
    }
    const uint64_t per = std::max<uint64_t>(ctx_.options->chunk_bytes / widest, 1);
    for (uint64_t first = 0; first < count; first += per) {
      const uint64_t m = std::min(per, count - first);
      v1::PipelineResponse& r = out.emplace_back();
      r.set_stage(static_cast<uint32_t>(i));
      for (int a = 0; a < kStageArrays; ++a) {
        const StageArrayRef& made = o.made[a];
        if (!made) continue;
        const size_t size = WireDTypeSize(made.dtype);
        std::string* field = DataField(&r, o.final, a, first);
        field->resize(m * size);
        made.memory->Read(first * size, field->data(), m * size);
        bytes_out_ += m * size;
      }
    }
  }

  // The field a piece of array `array` goes in, its response's offset set to `first`.
  static std::string* DataField(v1::PipelineResponse* r, const v1::PipelineResponse& final, int array,
                                uint64_t first) {
    if (final.has_compact()) {
      v1::CompactResponse* c = r->mutable_compact();
      c->set_kept_offset(first);
      return array == v1::STAGE_ARRAY_VALUES ? c->mutable_values() : c->mutable_indices();
    }
    if (final.has_sort()) {
      v1::SortResponse* s = r->mutable_sort();
      s->set_offset(first);
      return array == v1::STAGE_ARRAY_VALUES    ? s->mutable_keys()
             : array == v1::STAGE_ARRAY_INDICES ? s->mutable_indices()
                                                : s->mutable_values();
    }
    v1::ScanResponse* s = r->mutable_scan();
    s->set_offset(first);
    return s->mutable_data();
  }

  static std::string Algorithm(const v1::PipelineResponse& r) {
    switch (r.result_case()) {
      case v1::PipelineResponse::kScan: return r.scan().timing().algorithm();
      case v1::PipelineResponse::kReduce: return r.reduce().timing().algorithm();
      case v1::PipelineResponse::kCompact: return r.compact().timing().algorithm();
      case v1::PipelineResponse::kHistogram: return r.histogram().timing().algorithm();
      case v1::PipelineResponse::kSort: return r.sort().timing().algorithm();
      case v1::PipelineResponse::RESULT_NOT_SET: break;
    }
    return "";
  }

  PutChecks checks_;  // header.input's (gRPC thread), as PutArray's
  PipelinePlan plan_;
  std::string tenant_;
  std::vector<std::array<std::shared_ptr<const ResidentArray>, 4>> resident_;  // by stage and input slot
  StageArrayRef input_;            // header.input, once arrived (Open allocates it with a declared count)
  std::vector<std::string> held_;  // header.input without a count: its chunks until the end
  uint64_t written_ = 0;
  std::string algorithms_;  // each stage's, in order
  uint64_t run_us_ = 0, free_us_ = 0;  // for the log line (LogFields)
};

}  // namespace

grpc::ServerBidiReactor<v1::PipelineRequest, v1::PipelineResponse>* StartPipeline(CallContext ctx,
                                                                                  grpc::CallbackServerContext* rpc) {
  return StartCall<PipelineCall>(std::move(ctx), rpc, "pipeline");
}

}  // namespace gpuscan::server
