#include "service/pipeline_plan.h"

#include <fmt/format.h>

#include "service/call_header.h"
#include "service/resident_call.h"
#include "service/resident_store.h"
#include "service/status.h"
#include "service/validate.h"

namespace gpuscan::server {
namespace {

const char* ArrayName(int array) {
  switch (array) {
    case v1::STAGE_ARRAY_VALUES: return "STAGE_ARRAY_VALUES";
    case v1::STAGE_ARRAY_INDICES: return "STAGE_ARRAY_INDICES";
    case v1::STAGE_ARRAY_SORT_VALUES: return "STAGE_ARRAY_SORT_VALUES";
  }
  return "an unknown StageArray";
}

// What a stage's header carries that says where its data is: a pipeline says it with the
// stage's inputs instead.
template <class Header>
grpc::Status NoPlacement(const Header& h, const std::string& field) {
  auto refuse = [&](const char* name) {
    return InvalidArgument(field + "." + name + ": not in a pipeline stage (the stage's inputs say where the data is)");
  };
  if (h.has_resident()) return refuse("resident");
  if (h.has_device_memory()) return refuse("device_memory");
  if constexpr (HasSharedMemory<Header>::value) {
    if (h.has_shared_memory()) return refuse("shared_memory");
  }
  if constexpr (HasLanes<Header>::value) {
    if (h.has_lanes()) return refuse("lanes");
  }
  return grpc::Status::OK;
}

// The dtype of a Scan or SegmentedScan stage's result: the input's; a narrow input's is its
// output's (FLOAT16 for a FLOAT16 output), as the streamed call answers.
int ScanResultDType(int input, const std::optional<NarrowInput>& narrow, engine::DType engine) {
  if (!narrow) return input;
  return narrow->half_out ? v1::DTYPE_FLOAT16 : ToWire(engine);
}

// The stage's operation: its spec, the dtype of its values input and of what it makes.
grpc::Status PlanOp(const v1::PipelineStage& s, const engine::Engine& engine, StagePlan* p, ResidentWants* wants) {
  auto common = [&](const auto& h, const char* name) {
    p->field += std::string(".") + name;
    if (auto st = NoPlacement(h, p->field); !st.ok()) return st;
    if (h.has_element_count()) p->declared = h.element_count();
    p->values.dtype = h.dtype();
    *wants = WantsOf(h);
    return grpc::Status::OK;
  };
  grpc::Status st;
  switch (s.op_case()) {
    case v1::PipelineStage::kScan:
      p->op = StageOp::kScan;
      if (st = common(s.scan(), "scan"); !st.ok()) return st;
      if (st = ToEngine(s.scan(), &p->scan, &p->narrow); !st.ok()) return Renamed(st, p->field);
      if (st = CheckScanAlgorithm(p->scan.algorithm, engine.scan_algorithms(), engine.name()); !st.ok()) {
        return Renamed(st, p->field);
      }
      p->makes[v1::STAGE_ARRAY_VALUES] = ScanResultDType(s.scan().dtype(), p->narrow, p->scan.dtype);
      return grpc::Status::OK;
    case v1::PipelineStage::kReduce:
      p->op = StageOp::kReduce;
      if (st = common(s.reduce(), "reduce"); !st.ok()) return st;
      if (st = ToEngine(s.reduce(), &p->reduce, &p->narrow); !st.ok()) return Renamed(st, p->field);
      return grpc::Status::OK;
    case v1::PipelineStage::kCompact:
      p->op = StageOp::kCompact;
      if (st = common(s.compact(), "compact"); !st.ok()) return st;
      if (st = ToEngine(s.compact(), &p->compact, &p->narrow); !st.ok()) return Renamed(st, p->field);
      if (p->compact.want_values) p->makes[v1::STAGE_ARRAY_VALUES] = s.compact().dtype();
      if (p->compact.want_indices) p->makes[v1::STAGE_ARRAY_INDICES] = v1::DTYPE_INT64;
      return grpc::Status::OK;
    case v1::PipelineStage::kHistogram:
      p->op = StageOp::kHistogram;
      if (st = common(s.histogram(), "histogram"); !st.ok()) return st;
      if (st = ToEngine(s.histogram(), engine::kMaxHistogramBins, &p->histogram, &p->narrow); !st.ok()) {
        return Renamed(st, p->field);
      }
      return grpc::Status::OK;
    case v1::PipelineStage::kSort:
      p->op = StageOp::kSort;
      if (st = common(s.sort(), "sort"); !st.ok()) return st;
      if (st = ToEngine(s.sort(), &p->sort, &p->narrow, &p->narrow_sort_values); !st.ok()) {
        return Renamed(st, p->field);
      }
      if (p->sort.want_keys) p->makes[v1::STAGE_ARRAY_VALUES] = s.sort().dtype();
      if (p->sort.want_indices) p->makes[v1::STAGE_ARRAY_INDICES] = v1::DTYPE_INT64;
      if (p->sort.has_values) p->makes[v1::STAGE_ARRAY_SORT_VALUES] = s.sort().values_dtype();
      return grpc::Status::OK;
    case v1::PipelineStage::kSegmentedScan:
      p->op = StageOp::kSegmentedScan;
      if (st = common(s.segmented_scan(), "segmented_scan"); !st.ok()) return st;
      if (st = ToEngine(s.segmented_scan(), &p->segmented, &p->narrow); !st.ok()) return Renamed(st, p->field);
      p->makes[v1::STAGE_ARRAY_VALUES] = ScanResultDType(s.segmented_scan().dtype(), p->narrow, p->segmented.dtype);
      return grpc::Status::OK;
    case v1::PipelineStage::OP_NOT_SET:
      break;
  }
  return InvalidArgument(p->field + ": no operation set (scan, reduce, compact, histogram, sort or segmented_scan)");
}

// One input: required when wanted, refused when not, and where it comes from.
grpc::Status PlanInput(const v1::StageInput& in, bool has, bool wanted, const char* name,
                       const char* why, int index, const std::vector<StagePlan>& earlier, StageSource* src) {
  src->field = fmt::format("header.stages[{}].{}", index, name);
  if (!wanted) {
    if (has) return InvalidArgument(src->field + ": this stage takes no such input (only with " + why + ")");
    src->kind = StageSource::Kind::kNone;
    return grpc::Status::OK;
  }
  if (!has || in.source_case() == v1::StageInput::SOURCE_NOT_SET) {
    return InvalidArgument(src->field + ": required (" + why + "): an id, an earlier stage or the streamed input");
  }
  if (in.source_case() != v1::StageInput::kStage && in.array() != v1::STAGE_ARRAY_VALUES) {
    return InvalidArgument(src->field + ".array: only with stage (an earlier stage's arrays)");
  }
  switch (in.source_case()) {
    case v1::StageInput::kId:
      if (in.id().size() != ResidentStore::kIdBytes) {
        return InvalidArgument(fmt::format("{}.id: {} bytes; an array id has {}", src->field, in.id().size(),
                                           ResidentStore::kIdBytes));
      }
      src->kind = StageSource::Kind::kResident;
      src->id = in.id();
      return grpc::Status::OK;
    case v1::StageInput::kStreamed:
      if (!in.streamed()) return InvalidArgument(src->field + ".streamed: false; set it true or name another source");
      src->kind = StageSource::Kind::kStreamed;
      return grpc::Status::OK;
    case v1::StageInput::kStage: {
      if (in.stage() >= static_cast<uint32_t>(index)) {
        return InvalidArgument(index == 0 ? fmt::format("{}.stage: {} is not an earlier stage (stage 0 has none)",
                                                        src->field, in.stage())
                                          : fmt::format("{}.stage: {} is not an earlier stage (stage {} may read "
                                                        "stages 0 to {})", src->field, in.stage(), index, index - 1));
      }
      if (!v1::StageArray_IsValid(in.array())) {
        return InvalidArgument(fmt::format("{}.array: {} is not a StageArray", src->field, in.array()));
      }
      const StagePlan& from = earlier[in.stage()];
      if (from.makes[in.array()] == 0) {
        return InvalidArgument(fmt::format("{}: stage {} ({}) makes no {}", src->field, in.stage(),
                                           StageOpName(from.op), ArrayName(in.array())));
      }
      src->kind = StageSource::Kind::kStage;
      src->stage = in.stage();
      src->array = in.array();
      return grpc::Status::OK;
    }
    case v1::StageInput::SOURCE_NOT_SET:
      break;
  }
  return InvalidArgument(src->field + ": no source");
}

// The dtype check of an input whose dtype is known now (an earlier stage's array).
grpc::Status CheckStageDType(const StageSource& src, const std::vector<StagePlan>& earlier, bool flags) {
  if (src.kind != StageSource::Kind::kStage) return grpc::Status::OK;
  const int made = earlier[src.stage].makes[src.array];
  if (flags ? WireDTypeSize(made) != 1 : made != src.dtype) {
    return InvalidArgument(fmt::format("{}: stage {}'s {} is {}; this input must be {}", src.field, src.stage,
                                       ArrayName(src.array), DTypeText(made),
                                       flags ? std::string("one byte an element (UINT8 or INT8)") : DTypeText(src.dtype)));
  }
  return grpc::Status::OK;
}

}  // namespace

const char* StageOpName(StageOp op) {
  switch (op) {
    case StageOp::kScan: return "scan";
    case StageOp::kReduce: return "reduce";
    case StageOp::kCompact: return "compact";
    case StageOp::kHistogram: return "histogram";
    case StageOp::kSort: return "sort";
    case StageOp::kSegmentedScan: return "segmented_scan";
  }
  return "?";
}

grpc::Status Renamed(const grpc::Status& status, const std::string& prefix) {
  if (status.ok()) return status;
  const std::string& m = status.error_message();
  if (m.rfind("header.", 0) == 0) return {status.error_code(), prefix + m.substr(6)};
  return {status.error_code(), prefix + ": " + m};
}

grpc::Status InputRenamed(const grpc::Status& status) {
  if (status.ok()) return status;
  std::string m = status.error_message();
  if (m.find("header.") == std::string::npos) return {status.error_code(), "header.input: " + m};
  for (size_t at = 0; (at = m.find("header.", at)) != std::string::npos; at += 13) m.replace(at, 7, "header.input.");
  return {status.error_code(), m};
}

grpc::Status PlanPipeline(const v1::PipelineHeader& header, const engine::Engine& engine, PipelinePlan* plan) {
  const int count = header.stages_size();
  if (count == 0) return InvalidArgument("header.stages: empty (a pipeline has at least one stage)");
  if (count > static_cast<int>(kMaxPipelineStages)) {
    return InvalidArgument(fmt::format("header.stages: {} stages; at most {} (Limits.max_pipeline_stages)", count,
                                       kMaxPipelineStages));
  }
  plan->stages.clear();
  plan->stages.reserve(count);
  bool reads_streamed = false;
  for (int i = 0; i < count; ++i) {
    const v1::PipelineStage& s = header.stages(i);
    StagePlan& p = plan->stages.emplace_back();
    p.field = fmt::format("header.stages[{}]", i);
    ResidentWants wants;
    if (auto st = PlanOp(s, engine, &p, &wants); !st.ok()) return st;
    const std::vector<StagePlan>& earlier = plan->stages;
    struct Slot {
      const v1::StageInput& in;
      bool has;
      bool wanted;
      const char* name;
      const char* why;
      StageSource* src;
      int dtype;
    };
    const Slot slots[] = {
        {s.values(), s.has_values(), true, "values", "the array the header's dtype describes", &p.values, p.values.dtype},
        {s.flags(), s.has_flags(), wants.flags, "flags", "use_flags or heads", &p.flags, 0},
        {s.keys(), s.has_keys(), wants.keys_dtype != 0, "keys", "key_dtype", &p.keys, wants.keys_dtype},
        {s.sort_values(), s.has_sort_values(), wants.sort_values_dtype != 0, "sort_values",
         "output SORT_OUTPUT_KEYS_AND_VALUES", &p.sort_values, wants.sort_values_dtype},
    };
    for (const Slot& slot : slots) {
      if (auto st = PlanInput(slot.in, slot.has, slot.wanted, slot.name, slot.why, i, earlier, slot.src); !st.ok()) {
        return st;
      }
      slot.src->dtype = slot.dtype;
      if (auto st = CheckStageDType(*slot.src, earlier, slot.src == &p.flags); !st.ok()) return st;
      if (slot.src->kind == StageSource::Kind::kStreamed) {
        reads_streamed = true;
        if (!header.has_input()) {
          return InvalidArgument(slot.src->field + ".streamed: the pipeline has no streamed input (header.input)");
        }
        const int in_dtype = header.input().dtype();
        const bool ok = slot.src == &p.flags ? WireDTypeSize(in_dtype) == 1 : in_dtype == slot.dtype;
        if (!ok) {
          return InvalidArgument(fmt::format("{}.streamed: header.input.dtype is {}; this input must be {}",
                                             slot.src->field, DTypeText(in_dtype),
                                             slot.src == &p.flags ? std::string("UINT8 or INT8") : DTypeText(slot.dtype)));
        }
      }
      if (slot.src->kind == StageSource::Kind::kStage) {
        plan->stages[slot.src->stage].last_reader[slot.src->array] = i;
      }
    }
    if (!v1::StageReturn_IsValid(s.returns())) {
      return InvalidArgument(fmt::format("{}.returns: {} is not a StageReturn", p.field.substr(0, p.field.rfind('.')),
                                         static_cast<int>(s.returns())));
    }
    const std::string stage_field = fmt::format("header.stages[{}]", i);
    if (s.returns() != v1::STAGE_RETURN_NONE && (p.op == StageOp::kReduce || p.op == StageOp::kHistogram)) {
      return InvalidArgument(stage_field + ".returns: a " + StageOpName(p.op) +
                             " stage answers values in its final response, not arrays to return or keep");
    }
    if (auto st = ResidentStore::CheckLabel(s.label(), stage_field + ".label"); !st.ok()) return st;
    p.returns = s.returns();
    p.ttl_ms = s.ttl_ms();
    p.label = s.label();
  }
  if (header.input().has_shared_memory() || header.input().has_device_memory()) {
    return InvalidArgument(std::string("header.input.") +
                           (header.input().has_shared_memory() ? "shared_memory" : "device_memory") +
                           ": a pipeline's input is streamed (PutArray it from there, then name its id)");
  }
  if (header.has_input() && !reads_streamed) {
    return InvalidArgument("header.input: set, but no stage reads it (StageInput.streamed)");
  }
  plan->streamed = reads_streamed;
  return grpc::Status::OK;
}

}  // namespace gpuscan::server
