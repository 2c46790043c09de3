// The request fuzzer's Pipeline calls (request_fuzz_target.h's kinds 20 and 21).
//
// Kind 20, the call as pipeline_handler.cc runs it, on a ResidentStore of the input's own over the
// CPU engine: request #0's header through PlanPipeline (service/pipeline_plan.h, the very code the
// handler runs), then the resident ids found as the handler's FindResident finds them, header.input
// through PutChecks (Header, each request's Chunk, Finish) and its memory taken as Open and
// TakeInput take it, data refused without header.input and requests past a header that ends the
// stream not read; then the stages through RunStage (service/pipeline_stages.h), each array a
// stage makes freed after its last reader, kept arrays cut (CutToCount) and registered. Short ids
// (one byte) in the stages' inputs name arrays the fuzzer puts first, in input order (stage 0's
// values, flags, keys, sort_values, then stage 1's, ...): the k-th from request #k's second stream
// (empty past the last request), of the dtype its byte names (AnyDType). Stage ttls below a minute
// are raised by a minute (PinTtl).
//
// Kind 21, the plan alone: every record's header bytes concatenated (protobuf merges them, so the
// stages of all records add up: past the 255 bytes of one record, up to the 64-stage limit and
// beyond) through PlanPipeline, short ids made 24 bytes (of no array).
//
// Invariants (a violation aborts): a refusal has one of the resident codes and a message naming
// a field of the pipeline (header.stages..., header.input..., a request, the tenant or a flag),
// and a stage it names is one of the header's; an accepted plan says what the header says (each
// stage's op, inputs only from earlier stages that make that array in the dtype the input needs,
// the streamed input read exactly when header.input is set, each array's last reader, no returns
// of a Reduce or Histogram); no stage reads an array freed before its last reader; each stage that
// runs answers what the references give for its inputs (scans and segmented scans exactly, the
// canonical tree where the session is deterministic; reductions where exact; compactions, sorts and
// histograms exactly); kept arrays hold what the stage made, with the stage's label and ttl; and
// once the call is over the store counts the input's and the intermediates' bytes no more.
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "canonical_reference.h"
#include "engine/histogram.h"
#include "gpuscan/v1/gpuscan.pb.h"
#include "request_fuzz_calls.h"
#include "request_fuzz_common.h"
#include "request_fuzz_store.h"
#include "service/pipeline_plan.h"
#include "service/pipeline_stages.h"
#include "service/resident_call.h"
#include "service/resident_store.h"
#include "service/status.h"
#include "service/validate.h"

namespace gpuscan::fuzz {
namespace {

using server::StageArrayRef;
using server::StagePlan;
using server::StageSource;
using Kind = StageSource::Kind;

// A Pipeline's refusal: the resident codes and a field (CheckResidentRejected), and more narrowly
// a field of this RPC; a stage it names is one of the header's `stages`.
void CheckPipelineRejected(const grpc::Status& s, int stages) {
  CheckResidentRejected(s);
  const std::string& m = s.error_message();
  static const char* const kFields[] = {"header.stages", "header.input", "request #", "data of request",
                                        "empty stream", "metadata gpuscan-tenant", "--resident-bytes",
                                        "--tenant-quota-bytes"};
  bool named = std::any_of(std::begin(kFields), std::end(kFields), [&](const char* f) { return m.find(f) != std::string::npos; });
  if (!named) Fail("a Pipeline refusal names no field of the pipeline: " + m);
  const size_t at = m.find("header.stages[");
  if (at != std::string::npos) {
    const long stage = std::strtol(m.c_str() + at + 14, nullptr, 10);
    if (stage < 0 || stage >= stages) {
      Fail("a Pipeline refusal names stage " + std::to_string(stage) + " of " + std::to_string(stages) + ": " + m);
    }
  }
}

// Each stage input of the header, in order, with the field that has it.
template <class F>
void ForEachInput(v1::PipelineHeader* header, F f) {
  for (v1::PipelineStage& s : *header->mutable_stages()) {
    if (s.has_values()) f(s.mutable_values());
    if (s.has_flags()) f(s.mutable_flags());
    if (s.has_keys()) f(s.mutable_keys());
    if (s.has_sort_values()) f(s.mutable_sort_values());
  }
}

// The stages' ttls raised as PinTtl raises them (the sweeper's clock is no part of the input).
void PinStageTtls(v1::PipelineHeader* header) {
  for (v1::PipelineStage& s : *header->mutable_stages()) s.set_ttl_ms(PinTtl(s.ttl_ms()));
}

// One-byte ids become arrays the fuzzer puts (the file's comment says which).
void PutShortIds(server::ResidentStore& store, v1::PipelineHeader* header, const std::vector<Request>& requests) {
  size_t k = 0;
  ForEachInput(header, [&](v1::StageInput* in) {
    if (in->source_case() != v1::StageInput::kId || in->id().size() != 1) return;
    std::string content = k < requests.size() ? requests[k].flags : std::string();
    ++k;
    if (!store.CheckServed().ok()) return;
    if (auto info = PutDirect(store, AnyDType(uint8_t(in->id()[0])), &content)) in->set_id(info->id());
  });
}

int OpOf(const v1::PipelineStage& s) {
  switch (s.op_case()) {
    case v1::PipelineStage::kScan: return int(server::StageOp::kScan);
    case v1::PipelineStage::kReduce: return int(server::StageOp::kReduce);
    case v1::PipelineStage::kCompact: return int(server::StageOp::kCompact);
    case v1::PipelineStage::kHistogram: return int(server::StageOp::kHistogram);
    case v1::PipelineStage::kSort: return int(server::StageOp::kSort);
    case v1::PipelineStage::kSegmentedScan: return int(server::StageOp::kSegmentedScan);
    case v1::PipelineStage::OP_NOT_SET: break;
  }
  return -1;
}

// An accepted plan says what the header says.
void CheckPlan(const v1::PipelineHeader& header, const server::PipelinePlan& plan) {
  const int count = header.stages_size();
  if (count < 1 || count > int(server::kMaxPipelineStages) || int(plan.stages.size()) != count) {
    Fail("a plan of " + std::to_string(plan.stages.size()) + " stages accepted for " + std::to_string(count));
  }
  bool streamed = false;
  std::vector<std::array<int, server::kStageArrays>> last(count, {-1, -1, -1});
  for (int i = 0; i < count; ++i) {
    const v1::PipelineStage& s = header.stages(i);
    const StagePlan& p = plan.stages[i];
    const std::string where = "plan of stage " + std::to_string(i) + ": ";
    if (OpOf(s) != int(p.op) || p.field != "header.stages[" + std::to_string(i) + "]." + server::StageOpName(p.op)) {
      Fail(where + "op " + server::StageOpName(p.op) + " (" + p.field + ") for the header's op case " +
           std::to_string(int(s.op_case())));
    }
    const bool answers_values = p.op == server::StageOp::kReduce || p.op == server::StageOp::kHistogram;
    if (p.returns != s.returns() || (answers_values && p.returns != v1::STAGE_RETURN_NONE) ||
        p.label != s.label() || p.label.size() > server::ResidentStore::kMaxLabelBytes) {
      Fail(where + "returns or label accepted as the header does not allow");
    }
    for (int a = 0; a < server::kStageArrays; ++a) {
      // Narrow arrays are made only by a stage with narrow inputs (a compaction's or sort's, a FLOAT16 scan).
      const bool narrow_ok = p.narrow.has_value() || p.narrow_sort_values.has_value();
      if (p.makes[a] != 0 && (answers_values || (server::WireDTypeSize(p.makes[a]) < 4 && !narrow_ok))) {
        Fail(where + "makes array " + std::to_string(a) + " of dtype " + std::to_string(p.makes[a]));
      }
    }
    if (p.values.kind == Kind::kNone) Fail(where + "no values input");
    const v1::StageInput* header_inputs[] = {&s.values(), &s.flags(), &s.keys(), &s.sort_values()};
    const bool has[] = {s.has_values(), s.has_flags(), s.has_keys(), s.has_sort_values()};
    for (size_t k = 0; k < 4; ++k) {
      const StageSource& src = *p.inputs()[k];
      if (src.kind == Kind::kNone) {
        if (has[k]) Fail(where + src.field + " is in the header but not in the plan");
        continue;
      }
      const v1::StageInput& in = *header_inputs[k];
      switch (src.kind) {
        case Kind::kResident:
          if (in.source_case() != v1::StageInput::kId || src.id != in.id() || src.id.size() != server::ResidentStore::kIdBytes) {
            Fail(where + src.field + ": a resident id of " + std::to_string(src.id.size()) + " bytes");
          }
          break;
        case Kind::kStreamed:
          if (!in.streamed() || !header.has_input()) Fail(where + src.field + ": streamed without header.input");
          streamed = true;
          break;
        case Kind::kStage: {
          if (int(src.stage) >= i || src.stage != in.stage() || src.array != in.array() || src.array < 0 ||
              src.array >= server::kStageArrays) {
            Fail(where + src.field + ": stage " + std::to_string(src.stage) + " array " + std::to_string(src.array));
          }
          const int made = plan.stages[src.stage].makes[src.array];
          const bool flags = k == 1;
          if (made == 0 || (flags ? server::WireDTypeSize(made) != 1 : made != src.dtype)) {
            Fail(where + src.field + ": reads an array of dtype " + std::to_string(made) + " for " +
                 std::to_string(src.dtype));
          }
          last[src.stage][src.array] = i;
          break;
        }
        case Kind::kNone: break;
      }
    }
  }
  if (streamed != plan.streamed || streamed != header.has_input()) {
    Fail("plan: streamed " + std::to_string(plan.streamed) + " for a header that reads it " + std::to_string(streamed) +
         " and has header.input " + std::to_string(header.has_input()));
  }
  for (int i = 0; i < count; ++i) {
    if (plan.stages[i].last_reader != last[i]) Fail("plan of stage " + std::to_string(i) + ": wrong last readers");
  }
}

// ---------------------------------------------------------------------------------------------
// The stages against the references

std::string ReadAll(const StageArrayRef& a) {
  std::string bytes(a.count * server::WireDTypeSize(a.dtype), '\0');
  if (!bytes.empty()) a.memory->Read(0, bytes.data(), bytes.size());
  return bytes;
}

// Segment heads: head bytes as they are, keys where one differs (in its bits) from the one before.
std::vector<uint8_t> Heads(const engine::SegmentedScanSpec& spec, const StageArrayRef& segments) {
  const std::string bytes = ReadAll(segments);
  if (spec.heads) return std::vector<uint8_t>(bytes.begin(), bytes.end());
  const size_t size = server::WireDTypeSize(segments.dtype);
  std::vector<uint8_t> h(segments.count);
  for (uint64_t i = 0; i < segments.count; ++i) {
    h[i] = i == 0 || std::memcmp(&bytes[i * size], &bytes[(i - 1) * size], size) != 0;
  }
  return h;
}

void CheckScan(const StagePlan& p, const StageArrayRef& values, const server::StageOutcome& o) {
  const engine::ScanSpec& spec = p.scan;
  engine::Visit(spec.dtype, spec.op, [&](auto t, auto op) {
    using T = typename decltype(t)::type;
    using Op = typename decltype(op)::type;
    const std::vector<T> x = Elements<T>(ReadAll(values));
    const bool canonical = o.final.scan().timing().algorithm() == "deterministic";
    ExpectSame(Elements<T>(ReadAll(o.made[v1::STAGE_ARRAY_VALUES])),
               canonical ? testing::CanonicalScanRef<T, Op>(x, spec.exclusive) : testing::ScanRef<T, Op>(x, spec.exclusive),
               p.field + " " + std::string(engine::Name(spec.op)) + " " + std::string(engine::Name(spec.dtype)));
  });
}

void CheckReduce(const StagePlan& p, const StageArrayRef& values, const server::StageOutcome& o) {
  const engine::ReduceSpec& spec = p.reduce;
  engine::Visit(spec.dtype, spec.op, [&](auto t, auto op) {
    using T = typename decltype(t)::type;
    using Op = typename decltype(op)::type;
    const std::vector<T> x = Elements<T>(ReadAll(values));
    const std::vector<T> got = Elements<T>(o.final.reduce().raw_value());
    if (got.size() != 1) Fail(p.field + ": raw_value of " + std::to_string(o.final.reduce().raw_value().size()) + " bytes");
    if (o.final.reduce().timing().algorithm() == "deterministic") {
      ExpectSame(got, {testing::CanonicalReduceRef<T, Op>(x)}, p.field);
    } else if constexpr (!testing::kRounds<T, Op>) {
      ExpectSame(got, {testing::ReduceRef<T, Op>(x)}, p.field);  // (a rounding fold of another association: no bits to hold it to)
    }
  });
}

void CheckCompact(const StagePlan& p, const StageArrayRef& values, const StageArrayRef& flags,
                  const server::StageOutcome& o) {
  const engine::CompactSpec& spec = p.compact;
  engine::VisitDType(spec.dtype, [&](auto t) {
    using T = typename decltype(t)::type;
    const std::vector<T> x = Elements<T>(ReadAll(values));
    testing::CompactResult<T> ref;
    if (spec.use_flags) {
      const std::string f = ReadAll(flags);
      ref = testing::CompactRef(x, std::vector<uint8_t>(f.begin(), f.end()));
    } else {
      T threshold, upper;
      std::memcpy(&threshold, spec.predicate.threshold, sizeof(T));
      std::memcpy(&upper, spec.predicate.upper, sizeof(T));
      ref = testing::CompactRef(x, spec.predicate.op, threshold, upper);
    }
    if (o.final.compact().kept_count() != ref.indices.size()) {
      Fail(p.field + ": kept " + std::to_string(o.final.compact().kept_count()) + ", expected " +
           std::to_string(ref.indices.size()));
    }
    if (spec.want_values) {
      const std::string got = ReadAll(o.made[v1::STAGE_ARRAY_VALUES]);
      if (got.size() != ref.values.size() * sizeof(T) || (!got.empty() && std::memcmp(got.data(), ref.values.data(), got.size()) != 0)) {
        Fail(p.field + ": the kept values differ in their bits");
      }
    }
    if (spec.want_indices) ExpectSame(Elements<int64_t>(ReadAll(o.made[v1::STAGE_ARRAY_INDICES])), ref.indices, p.field + " indices");
  });
}

void CheckHistogram(const StagePlan& p, const StageArrayRef& values, const server::StageOutcome& o) {
  const engine::HistogramSpec& spec = p.histogram;
  engine::VisitDType(spec.dtype, [&](auto t) {
    using T = typename decltype(t)::type;
    const std::vector<uint64_t> want = testing::HistogramRef(Elements<T>(ReadAll(values)), spec.edges);
    const v1::HistogramResponse& r = o.final.histogram();
    const size_t bins = spec.edges.size() - 1;
    std::vector<uint64_t> got = Elements<uint64_t>(r.counts());
    if (got.size() != bins) Fail(p.field + ": " + std::to_string(got.size()) + " counts for " + std::to_string(bins) + " bins");
    got.resize(bins + 3);
    got[bins + engine::kHistogramBelow] = r.below();
    got[bins + engine::kHistogramAbove] = r.above();
    got[bins + engine::kHistogramNan] = r.nan_count();
    ExpectSame(got, want, p.field);
  });
}

void CheckSort(const StagePlan& p, const StageArrayRef& keys, const StageArrayRef& values, const server::StageOutcome& o) {
  const engine::SortSpec& spec = p.sort;
  engine::VisitDType(spec.dtype, [&](auto t) {
    using T = typename decltype(t)::type;
    const std::string k = ReadAll(keys);
    const std::vector<T> x = Elements<T>(k);
    std::vector<int64_t> order(x.size());
    std::iota(order.begin(), order.end(), int64_t{0});
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
      return spec.descending ? SortBefore(x[b], x[a]) : SortBefore(x[a], x[b]);
    });
    auto moved = [&](const std::string& in, size_t size) {
      std::string out(in.size(), '\0');
      for (size_t i = 0; i < order.size(); ++i) std::memcpy(&out[i * size], &in[order[i] * size], size);
      return out;
    };
    if (spec.want_keys && ReadAll(o.made[v1::STAGE_ARRAY_VALUES]) != moved(k, sizeof(T))) {
      Fail(p.field + ": the sorted keys differ from the stable sort's");
    }
    if (spec.has_values &&
        ReadAll(o.made[v1::STAGE_ARRAY_SORT_VALUES]) != moved(ReadAll(values), server::WireDTypeSize(values.dtype))) {
      Fail(p.field + ": the values did not move with their keys");
    }
    if (spec.want_indices) ExpectSame(Elements<int64_t>(ReadAll(o.made[v1::STAGE_ARRAY_INDICES])), order, p.field + " indices");
  });
}

void CheckSegmentedScan(const StagePlan& p, const StageArrayRef& values, const StageArrayRef& segments,
                        const server::StageOutcome& o) {
  const engine::SegmentedScanSpec& spec = p.segmented;
  engine::Visit(spec.dtype, spec.op, [&](auto t, auto op) {
    using T = typename decltype(t)::type;
    using Op = typename decltype(op)::type;
    const std::vector<T> x = Elements<T>(ReadAll(values));
    const std::vector<uint8_t> heads = Heads(spec, segments);
    const std::vector<T> want = testing::kRounds<T, Op> ? testing::SegmentedCanonicalRef<T, Op>(x, heads, spec.exclusive)
                                                        : testing::SegmentedScanRef<T, Op>(x, heads, spec.exclusive);
    ExpectSame(Elements<T>(ReadAll(o.made[v1::STAGE_ARRAY_VALUES])), want, p.field);
  });
}

// What a stage that ran made and answered, against the references on its inputs.
void CheckStage(const StagePlan& p, const std::array<StageArrayRef, 4>& in, const server::StageOutcome& o) {
  for (int a = 0; a < server::kStageArrays; ++a) {
    const StageArrayRef& m = o.made[a];
    if (bool(m) != (p.makes[a] != 0) || (m && (m.dtype != p.makes[a] || m.count > in[0].count))) {
      Fail(p.field + ": made array " + std::to_string(a) + " is not the one the plan says");
    }
  }
  // The references below read the inputs as the engine's dtype; a narrow stage's bits are held
  // to its operation's own calls by pipeline_narrow_test instead.
  if (p.narrow || p.narrow_sort_values) return;
  switch (p.op) {
    case server::StageOp::kScan: return CheckScan(p, in[0], o);
    case server::StageOp::kReduce: return CheckReduce(p, in[0], o);
    case server::StageOp::kCompact: return CheckCompact(p, in[0], in[1], o);
    case server::StageOp::kHistogram: return CheckHistogram(p, in[0], o);
    case server::StageOp::kSort: return CheckSort(p, in[0], in[3], o);
    case server::StageOp::kSegmentedScan: return CheckSegmentedScan(p, in[0], in[2] ? in[2] : in[1], o);
  }
}

// ---------------------------------------------------------------------------------------------
// The call

class PipelineCall {
 public:
  PipelineCall(server::ResidentStore& store, uint64_t chunk_bytes)
      : store_(store), chunk_bytes_(chunk_bytes), checks_(store, chunk_bytes) {}

  Result Run(const std::vector<Request>& requests) {
    grpc::Status st = requests.empty() ? server::EmptyStreamStatus() : grpc::Status::OK;
    for (uint64_t i = 0; st.ok() && i < requests.size(); ++i) {
      const Request& r = requests[i];
      st = server::CheckHeaderPlacement(i, r.has_header);
      if (st.ok() && i == 0) {
        header_ = ParseHeader<v1::PipelineHeader>(r.header);
        PinStageTtls(&header_);
        PutShortIds(store_, &header_, requests);
        stages_ = header_.stages_size();
        st = OnHeader();
      }
      if (st.ok()) st = CheckRequest(r, i);
      if (st.ok() && i == 0) st = Open();
      if (st.ok()) Process(r);
      if (i == 0 && st.ok() && !plan_.streamed) break;  // HeaderEndsStream: nothing more is read
    }
    // What the store counts besides the call's input, before the stages run.
    const bool ran = st.ok();
    const uint64_t before = store_.used_bytes() - (input_.memory ? input_bytes_ : 0);
    if (st.ok()) st = Complete();
    if (!st.ok()) CheckPipelineRejected(st, stages_);
    // The call is over: its holds go, and with them the input and every intermediate.
    resident_.clear();
    input_ = {};
    outcomes_.clear();
    const uint64_t after = store_.used_bytes();
    if (ran && after != before + (st.ok() ? kept_bytes_ : 0)) {
      Fail("Pipeline: the store counts " + std::to_string(after) + " bytes once the call is over; " +
           std::to_string(before) + " before its stages ran, and " + std::to_string(st.ok() ? kept_bytes_ : 0) + " kept");
    }
    return {st, elements_};
  }

 private:
  // The handler's OnHeader: the plan, header.input's checks (or the tenant), the resident ids.
  grpc::Status OnHeader() {
    if (auto s = store_.CheckServed(); !s.ok()) return s;
    if (auto s = server::PlanPipeline(header_, Engine(), &plan_); !s.ok()) return s;
    CheckPlan(header_, plan_);
    if (plan_.streamed) {
      if (auto s = checks_.Header(header_.input(), NoCall(), &tenant_); !s.ok()) return server::InputRenamed(s);
    } else if (auto s = server::TenantOf(NoCall(), &tenant_); !s.ok()) {
      return s;
    }
    // FindResident (pipeline_handler.cc, private to the handler: these lines follow it).
    resident_.assign(plan_.stages.size(), {});
    for (size_t i = 0; i < plan_.stages.size(); ++i) {
      const StagePlan& p = plan_.stages[i];
      for (size_t k = 0; k < 4; ++k) {
        const StageSource& src = *p.inputs()[k];
        if (src.kind != Kind::kResident) continue;
        std::shared_ptr<const server::ResidentArray>& a = resident_[i][k];
        if (auto s = store_.Find(tenant_, src.id, src.field + ".id", &a); !s.ok()) return s;
        const bool flags = k == 1;
        if (flags ? server::WireDTypeSize(a->dtype) != 1 : a->dtype != src.dtype) {
          return server::InvalidArgument(src.field + ".id is " + server::DTypeText(a->dtype) + "; this input must be " +
                                         (flags ? std::string("UINT8 or INT8") : server::DTypeText(src.dtype)));
        }
      }
    }
    return grpc::Status::OK;
  }

  grpc::Status CheckRequest(const Request& r, uint64_t index) {
    if (!plan_.streamed) {
      if (r.data.empty()) return grpc::Status::OK;
      return server::InvalidArgument("request #" + std::to_string(index) +
                                     ": data, but the pipeline has no streamed input (header.input)");
    }
    return server::InputRenamed(checks_.Chunk(r.data.size(), index));
  }

  // The handler's Open: a declared input's memory, taken once the call is admitted.
  grpc::Status Open() {
    if (!plan_.streamed || !checks_.header().has_element_count()) return grpc::Status::OK;
    const uint64_t bytes = std::max<uint64_t>(checks_.header().element_count() * checks_.element_size(), 1);
    if (auto s = store_.Allocate(tenant_, bytes, &input_.memory); !s.ok()) {
      return {grpc::StatusCode::RESOURCE_EXHAUSTED, "header.input: " + s.error_message()};
    }
    input_bytes_ = bytes;
    return grpc::Status::OK;
  }

  void Process(const Request& r) {
    if (!plan_.streamed || r.data.empty()) return;
    if (input_.memory) {
      input_.memory->Write(written_, r.data.data(), r.data.size());
    } else {
      held_ += r.data;
    }
    sent_ += r.data;
    written_ += r.data.size();
  }

  // The handler's Complete: the input taken, the stages run in order, what they made freed after
  // its last reader, the kept arrays registered once every stage ran.
  grpc::Status Complete() {
    if (plan_.streamed) {
      if (auto s = checks_.Finish(written_); !s.ok()) return server::InputRenamed(s);
      if (!input_.memory) {
        input_bytes_ = std::max<uint64_t>(written_, 1);
        if (auto s = store_.Allocate(tenant_, input_bytes_, &input_.memory); !s.ok()) {
          input_bytes_ = 0;
          return server::Renamed(s, "header.input");
        }
        if (!held_.empty()) input_.memory->Write(0, held_.data(), held_.size());
      }
      input_.dtype = checks_.header().dtype();
      input_.count = written_ / checks_.element_size();
      if (ReadAll(input_) != sent_) Fail("Pipeline: the streamed input holds other bytes than were sent");
    }
    const server::StageEnv env{store_, tenant_, chunk_bytes_};
    outcomes_.assign(plan_.stages.size(), {});
    for (size_t i = 0; i < plan_.stages.size(); ++i) {
      const StagePlan& p = plan_.stages[i];
      std::array<StageArrayRef, 4> in;
      for (size_t k = 0; k < 4; ++k) in[k] = Input(*p.inputs()[k], i, k);
      grpc::Status s;
      try {
        s = server::RunStage(env, p, in[0], in[1], in[2], in[3], &outcomes_[i]);
      } catch (const std::exception& e) {
        Fail(p.field + ": a planned stage made the engine throw: " + e.what());
      }
      if (!s.ok()) {
        if (s.error_message().rfind(p.field.substr(0, p.field.rfind('.')), 0) != 0) {
          Fail("a stage that failed when it ran does not name itself first: " + s.error_message());
        }
        return s;
      }
      CheckStage(p, in, outcomes_[i]);
      elements_ += in[0].count;
      FreeRead(i);
    }
    return Keep();
  }

  StageArrayRef Input(const StageSource& src, size_t stage, size_t slot) const {
    StageArrayRef r;
    switch (src.kind) {
      case Kind::kNone: break;
      case Kind::kStreamed: r = input_; break;
      case Kind::kStage:
        r = outcomes_[src.stage].made[src.array];
        if (!r) Fail(src.field + ": stage " + std::to_string(src.stage) + "'s array was freed before its last reader");
        break;
      case Kind::kResident: {
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

  void FreeRead(size_t i) {
    for (size_t j = 0; j <= i; ++j) {
      const StagePlan& p = plan_.stages[j];
      if (p.returns != v1::STAGE_RETURN_NONE) continue;
      for (int a = 0; a < server::kStageArrays; ++a) {
        if (p.last_reader[a] <= static_cast<int>(i)) outcomes_[j].made[a] = {};
      }
    }
  }

  grpc::Status Keep() {
    const server::StageEnv env{store_, tenant_, chunk_bytes_};
    for (size_t i = 0; i < outcomes_.size(); ++i) {
      const StagePlan& p = plan_.stages[i];
      for (int a = 0; a < server::kStageArrays; ++a) {
        if (p.returns != v1::STAGE_RETURN_NONE && bool(outcomes_[i].made[a]) != (p.makes[a] != 0)) {
          Fail(p.field + ": a returned or kept array is gone before the end");
        }
      }
      if (p.returns != v1::STAGE_RETURN_KEEP) continue;
      for (StageArrayRef& a : outcomes_[i].made) {
        if (!a) continue;
        if (auto s = server::CutToCount(env, p, &a); !s.ok()) return s;
        const uint64_t bytes = std::max<uint64_t>(a.count * server::WireDTypeSize(a.dtype), 1);
        if (a.memory->bytes() != bytes) Fail(p.field + ": a kept array was not cut to its count");
      }
    }
    const uint64_t cap = static_cast<uint64_t>(store_.options().max_ttl.count());
    for (size_t i = 0; i < outcomes_.size(); ++i) {
      const StagePlan& p = plan_.stages[i];
      if (p.returns != v1::STAGE_RETURN_KEEP) continue;
      for (StageArrayRef& made : outcomes_[i].made) {
        if (!made) continue;
        const std::string bytes = ReadAll(made);
        kept_bytes_ += made.memory->bytes();
        const v1::ArrayInfo info = store_.Add(tenant_, made.dtype, made.count, std::move(made.memory), p.ttl_ms, p.label);
        made = {};
        std::shared_ptr<const server::ResidentArray> a;
        if (!store_.Find(tenant_, info.id(), "id", &a).ok() || a->dtype != info.dtype() || a->count != info.element_count() ||
            info.bytes() != bytes.size() || info.label() != p.label ||
            info.ttl_ms() != (p.ttl_ms == 0 || p.ttl_ms > cap ? cap : p.ttl_ms)) {
          Fail(p.field + ": the kept array's info is not what the stage made");
        }
        std::string got(bytes.size(), '\0');
        if (!got.empty()) a->memory->Read(0, got.data(), got.size());
        if (got != bytes) Fail(p.field + ": the kept array holds other bytes than the stage made");
      }
    }
    return grpc::Status::OK;
  }

  server::ResidentStore& store_;
  const uint64_t chunk_bytes_;
  server::PutChecks checks_;
  v1::PipelineHeader header_;
  int stages_ = 0;
  server::PipelinePlan plan_;
  std::string tenant_;
  std::vector<std::array<std::shared_ptr<const server::ResidentArray>, 4>> resident_;
  StageArrayRef input_;
  uint64_t input_bytes_ = 0;   // what the input's memory counts against the budget
  std::string held_, sent_;    // undeclared chunks until the end; every chunk sent
  uint64_t written_ = 0;
  std::vector<server::StageOutcome> outcomes_;
  uint64_t kept_bytes_ = 0;
  uint64_t elements_ = 0;  // the stages' values elements, added up
};

}  // namespace

Result FuzzPipeline(server::ResidentStore& store, const std::vector<Request>& requests, uint64_t chunk_bytes) {
  return PipelineCall(store, chunk_bytes).Run(requests);
}

Result FuzzPipelinePlan(const std::vector<Request>& requests) {
  std::string bytes;
  for (const Request& r : requests) bytes += r.header;
  v1::PipelineHeader header = ParseHeader<v1::PipelineHeader>(bytes);
  ForEachInput(&header, [](v1::StageInput* in) {
    if (in->source_case() == v1::StageInput::kId && in->id().size() == 1) in->set_id(std::string(24, in->id()[0]));
  });
  server::PipelinePlan plan;
  const grpc::Status st = server::PlanPipeline(header, Engine(), &plan);
  if (!st.ok()) {
    CheckPipelineRejected(st, header.stages_size());
    return {st, 0};
  }
  CheckPlan(header, plan);
  return {st, plan.stages.size()};
}

}  // namespace gpuscan::fuzz
