// Pipelines (gpuscan/pipeline.h): the builder and its results (the raw call, Client::PipelineStream,
// is pipeline_stream.cc). Stage headers come from the builders the typed and resident calls use
// (typed_support.h), so a stage takes the same options.
#include "gpuscan/pipeline.h"

#include <grpcpp/impl/rpc_method.h>
#include <grpcpp/support/sync_stream.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>

#include "raw_messages.h"
#include "retry.h"
#include "stream_driver.h"
#include "typed_support.h"

namespace gpuscan {

// A namespace of its own: the unity build joins this file with others' anonymous namespaces.
namespace pipeline_detail {

RpcError Malformed(const std::string& what) {
  return RpcError(grpc::StatusCode::DATA_LOSS, "gpuscan: the pipeline's responses: " + what);
}

std::atomic<uint64_t> serials{0};

const char* ArrayName(v1::StageArray a) {
  switch (a) {
    case v1::STAGE_ARRAY_VALUES: return "values";
    case v1::STAGE_ARRAY_INDICES: return "indices";
    case v1::STAGE_ARRAY_SORT_VALUES: return "sort values";
    default: return "an unknown array";
  }
}

std::string StageText(const Stage& s) { return "stage " + std::to_string(s.index()); }

v1::StageReturn ToProto(Return r) {
  switch (r) {
    case Return::kData: return v1::STAGE_RETURN_DATA;
    case Return::kKeep: return v1::STAGE_RETURN_KEEP;
    case Return::kNone:
    case Return::kAuto: break;  // (resolved by Run)
  }
  return v1::STAGE_RETURN_NONE;
}

// A pipeline is one call on one server: lanes and shards asked for a stage are a mistake.
template <class Options>
void CheckOneCall(const Options& options, const char* op) {
  if (options.lanes > 1 || options.shards > 1) {
    throw std::invalid_argument(std::string("gpuscan: Pipeline ") + op + ": a stage runs in the pipeline's one call (" +
                                "its options ask for " + std::to_string(options.lanes) + " lanes, " +
                                std::to_string(options.shards) + " shards)");
  }
}

// One stage's data pieces: appended in order, each where the bytes before it end.
void Append(std::string* to, const std::string& piece, uint64_t offset, size_t esize, uint32_t stage,
            v1::StageArray array) {
  if (piece.empty()) return;
  if (esize == 0 || to->size() != offset * esize || piece.size() % esize) {
    throw Malformed("stage " + std::to_string(stage) + "'s " + ArrayName(array) + ": " + std::to_string(piece.size()) +
                    " bytes at element " + std::to_string(offset) + " where " + std::to_string(to->size()) +
                    " bytes had come");
  }
  to->append(piece);
}

// element_count where the count is known before the call (a Compact's kept count is not).
template <class Header>
void SetCount(Header* h, const std::optional<uint64_t>& count) {
  if (count) h->set_element_count(*count);
}

// The dtype of a scan's result (Scan, SegmentedScan): output_dtype when set, else a narrow
// dtype's default output as the server's (numpy's: INT64/UINT64, FLOAT16 stays), else the dtype.
v1::DType ScanResultDType(v1::DType dtype, v1::DType output) {
  if (output != v1::DTYPE_UNSPECIFIED) return output;
  switch (dtype) {
    case v1::DTYPE_INT8:
    case v1::DTYPE_INT16: return v1::DTYPE_INT64;
    case v1::DTYPE_UINT8:
    case v1::DTYPE_UINT16: return v1::DTYPE_UINT64;
    default: return dtype;
  }
}

std::array<v1::DType, 3> CompactMakes(v1::DType dtype, v1::CompactOutput output) {
  std::array<v1::DType, 3> makes{};
  if (output != v1::COMPACT_OUTPUT_INDICES) makes[v1::STAGE_ARRAY_VALUES] = dtype;
  if (output != v1::COMPACT_OUTPUT_VALUES) makes[v1::STAGE_ARRAY_INDICES] = v1::DTYPE_INT64;
  return makes;
}

void CheckCompact(const CompactOptions& options) {
  CheckOneCall(options, "Compact");
  if (!options.flags.empty()) {
    throw std::invalid_argument(
        "gpuscan: Pipeline Compact takes its flags as an input (a RemoteArray or the streamed "
        "input), not options.flags");
  }
}

}  // namespace pipeline_detail

Pipeline Client::NewPipeline() { return Pipeline(*this); }

// -- inputs

PipelineInput::PipelineInput(const RemoteArray& array) : kind_(Kind::kResident) {
  if (!array) throw std::invalid_argument("gpuscan: a pipeline input is an empty RemoteArray");
  client_ = array.client();
  id_ = array.id();
  dtype_ = array.dtype();
  count_ = array.size();
}

PipelineInput::PipelineInput(const Stage& stage) : kind_(Kind::kStage), stage_(stage), pipeline_(stage.pipeline_) {
  if (stage.pipeline_ == 0) throw std::invalid_argument("gpuscan: a pipeline input is a Stage that names no stage");
  dtype_ = stage.dtype();
  count_ = stage.count_;
}

// -- the builder

Pipeline::Pipeline(Client& client) : client_(&client), serial_(++pipeline_detail::serials) {}

PipelineInput Pipeline::Input(v1::DType dtype, const void* data, size_t bytes) {
  if (has_input_) throw std::invalid_argument("gpuscan: a Pipeline has one streamed input, set already");
  const size_t esize = DTypeSize(dtype);
  if (esize == 0) {
    throw std::invalid_argument("gpuscan: Pipeline input of dtype " + std::to_string(dtype) + ": not an element type");
  }
  if (bytes % esize) {
    throw std::invalid_argument("gpuscan: Pipeline input of " + std::to_string(bytes) + " bytes: not whole " +
                                v1::DType_Name(dtype) + " elements");
  }
  if (bytes > 0 && data == nullptr) throw std::invalid_argument("gpuscan: Pipeline input: no data");
  v1::PutArrayHeader* h = header_.mutable_input();
  h->set_dtype(dtype);
  h->set_element_count(bytes / esize);
  has_input_ = true;
  input_ = data;
  input_bytes_ = bytes;
  PipelineInput in;
  in.kind_ = PipelineInput::Kind::kStreamed;
  in.pipeline_ = serial_;
  in.dtype_ = dtype;
  in.count_ = bytes / esize;
  return in;
}

v1::StageInput Pipeline::Named(const PipelineInput& in, const char* op, const char* what) const {
  auto refuse = [&](const std::string& why) {
    throw std::invalid_argument(std::string("gpuscan: Pipeline ") + op + ": its " + what + " " + why);
  };
  v1::StageInput s;
  switch (in.kind_) {
    case PipelineInput::Kind::kResident:
      if (in.client_ != client_) refuse("is a RemoteArray of another Client");
      s.set_id(in.id_);
      break;
    case PipelineInput::Kind::kStreamed:
      if (in.pipeline_ != serial_) refuse("is another Pipeline's streamed input");
      s.set_streamed(true);
      break;
    case PipelineInput::Kind::kStage: {
      const Stage& st = in.stage_;
      if (in.pipeline_ != serial_) refuse("is a Stage of another Pipeline");
      if (!st.makes(st.array())) {
        refuse("is " + pipeline_detail::StageText(st) + "'s " + pipeline_detail::ArrayName(st.array()) +
               ", which that stage does not make");
      }
      s.set_stage(st.index());
      s.set_array(st.array());
      break;
    }
  }
  return s;
}

v1::PipelineStage* Pipeline::Add(const PipelineInput& in, Return returns, const ResidentOptions& keep, const char* op) {
  if (returns != Return::kKeep && (keep.ttl.count() != 0 || !keep.label.empty())) {
    throw std::invalid_argument(std::string("gpuscan: Pipeline ") + op +
                                ": a ttl or label for arrays it does not keep (Return::kKeep)");
  }
  v1::StageInput values = Named(in, op, "input");
  v1::PipelineStage* s = header_.add_stages();
  *s->mutable_values() = std::move(values);
  s->set_returns(pipeline_detail::ToProto(returns));
  if (returns == Return::kKeep) {
    s->set_ttl_ms(static_cast<uint64_t>(std::max<int64_t>(0, keep.ttl.count())));
    s->set_label(keep.label);
  }
  returns_.push_back(returns);
  return s;
}

Stage Pipeline::Made(const PipelineInput& in, std::array<v1::DType, 3> makes, std::optional<uint64_t> count) {
  Stage s;
  s.pipeline_ = serial_;
  s.index_ = static_cast<uint32_t>(header_.stages_size() - 1);
  s.input_dtype_ = in.dtype();
  s.makes_ = makes;
  s.count_ = count;
  // The main array: the first one it makes (Argsort's and an indices-only Compact's: indices).
  for (int a = 0; a < 3; ++a) {
    if (makes[a] != v1::DTYPE_UNSPECIFIED) {
      s.array_ = static_cast<v1::StageArray>(a);
      break;
    }
  }
  stages_.push_back(s);
  return s;
}

Stage Pipeline::Scan(const PipelineInput& in, const ScanOptions& options, Return returns, const ResidentOptions& keep) {
  pipeline_detail::CheckOneCall(options, "Scan");
  if (options.carry) detail::RequireServed(*client_, "scan_carry", "scans with a carry");
  v1::ScanHeader h = detail::ScanHeaderFor(in.dtype(), options);
  pipeline_detail::SetCount(&h, in.count_);
  const v1::DType result = pipeline_detail::ScanResultDType(in.dtype(), h.output_dtype());
  *Add(in, returns, keep, "Scan")->mutable_scan() = std::move(h);
  return Made(in, {result, v1::DTYPE_UNSPECIFIED, v1::DTYPE_UNSPECIFIED}, in.count_);
}

Stage Pipeline::Reduce(const PipelineInput& in, v1::Operator op) {
  v1::ReduceHeader h = detail::ReduceHeaderFor(in.dtype(), op);
  pipeline_detail::SetCount(&h, in.count_);
  *Add(in, Return::kNone, {}, "Reduce")->mutable_reduce() = std::move(h);
  return Made(in, {}, in.count_);
}

Stage Pipeline::Compact(const PipelineInput& in, const CompactOptions& options, Return returns,
                        const ResidentOptions& keep) {
  pipeline_detail::CheckCompact(options);
  if (options.use_flags) {
    throw std::invalid_argument(
        "gpuscan: Pipeline Compact with use_flags needs its flags input "
        "(Compact(in, flags, options))");
  }
  v1::CompactHeader h = detail::CompactHeaderFor(in.dtype(), options);
  pipeline_detail::SetCount(&h, in.count_);
  *Add(in, returns, keep, "Compact")->mutable_compact() = std::move(h);
  return Made(in, pipeline_detail::CompactMakes(in.dtype(), options.output), std::nullopt);
}

Stage Pipeline::Compact(const PipelineInput& in, const PipelineInput& flags, const CompactOptions& options,
                        Return returns, const ResidentOptions& keep) {
  pipeline_detail::CheckCompact(options);
  v1::CompactHeader h = detail::CompactHeaderFor(in.dtype(), options);
  h.set_use_flags(true);
  pipeline_detail::SetCount(&h, in.count_);
  v1::StageInput f = Named(flags, "Compact", "flags");
  v1::PipelineStage* s = Add(in, returns, keep, "Compact");
  *s->mutable_compact() = std::move(h);
  *s->mutable_flags() = std::move(f);
  return Made(in, pipeline_detail::CompactMakes(in.dtype(), options.output), std::nullopt);
}

Stage Pipeline::Histogram(const PipelineInput& in, const HistogramBins& bins) {
  v1::HistogramHeader h = HistogramHeaderFor(in.dtype(), bins);
  pipeline_detail::SetCount(&h, in.count_);
  *Add(in, Return::kNone, {}, "Histogram")->mutable_histogram() = std::move(h);
  return Made(in, {}, in.count_);
}

Stage Pipeline::SegmentedScan(const PipelineInput& in, const PipelineInput& keys, const SegmentedScanOptions& options,
                              Return returns, const ResidentOptions& keep) {
  v1::SegmentedScanHeader h = detail::ScanKindHeader<v1::SegmentedScanHeader>(in.dtype(), options);
  h.set_key_dtype(keys.dtype());
  pipeline_detail::SetCount(&h, in.count_);
  v1::StageInput k = Named(keys, "SegmentedScan", "keys");
  const v1::DType result = pipeline_detail::ScanResultDType(in.dtype(), h.output_dtype());
  v1::PipelineStage* s = Add(in, returns, keep, "SegmentedScan");
  *s->mutable_segmented_scan() = std::move(h);
  *s->mutable_keys() = std::move(k);
  return Made(in, {result, v1::DTYPE_UNSPECIFIED, v1::DTYPE_UNSPECIFIED}, in.count_);
}

Stage Pipeline::SegmentedScanHeads(const PipelineInput& in, const PipelineInput& heads,
                                   const SegmentedScanOptions& options, Return returns, const ResidentOptions& keep) {
  v1::SegmentedScanHeader h = detail::ScanKindHeader<v1::SegmentedScanHeader>(in.dtype(), options);
  h.set_heads(true);
  pipeline_detail::SetCount(&h, in.count_);
  v1::StageInput f = Named(heads, "SegmentedScanHeads", "heads");
  const v1::DType result = pipeline_detail::ScanResultDType(in.dtype(), h.output_dtype());
  v1::PipelineStage* s = Add(in, returns, keep, "SegmentedScanHeads");
  *s->mutable_segmented_scan() = std::move(h);
  *s->mutable_flags() = std::move(f);
  return Made(in, {result, v1::DTYPE_UNSPECIFIED, v1::DTYPE_UNSPECIFIED}, in.count_);
}

Stage Pipeline::Sort(const PipelineInput& keys, const PipelineInput* values, v1::SortOutput output, bool descending,
                     Return returns, const ResidentOptions& keep) {
  if ((values != nullptr) != (output == v1::SORT_OUTPUT_KEYS_AND_VALUES)) {
    throw std::invalid_argument("gpuscan: Pipeline Sort: values go with (and only with) SORT_OUTPUT_KEYS_AND_VALUES");
  }
  v1::SortHeader h;
  h.set_dtype(keys.dtype());
  h.set_descending(descending);
  h.set_output(output);
  pipeline_detail::SetCount(&h, keys.count_);
  std::optional<v1::StageInput> v;
  if (values) {
    h.set_values_dtype(values->dtype());
    v = Named(*values, "Sort", "values");
  }
  v1::PipelineStage* s = Add(keys, returns, keep, "Sort");
  *s->mutable_sort() = std::move(h);
  if (v) *s->mutable_sort_values() = std::move(*v);
  std::array<v1::DType, 3> makes{};
  if (output != v1::SORT_OUTPUT_INDICES) makes[v1::STAGE_ARRAY_VALUES] = keys.dtype();
  if (output == v1::SORT_OUTPUT_INDICES || output == v1::SORT_OUTPUT_KEYS_AND_INDICES) {
    makes[v1::STAGE_ARRAY_INDICES] = v1::DTYPE_INT64;
  }
  if (values) makes[v1::STAGE_ARRAY_SORT_VALUES] = values->dtype();
  return Made(keys, makes, keys.count_);
}

Stage Pipeline::Sort(const PipelineInput& keys, bool descending, Return returns, const ResidentOptions& keep) {
  return Sort(keys, nullptr, v1::SORT_OUTPUT_KEYS, descending, returns, keep);
}

Stage Pipeline::Argsort(const PipelineInput& keys, bool descending, Return returns, const ResidentOptions& keep) {
  return Sort(keys, nullptr, v1::SORT_OUTPUT_INDICES, descending, returns, keep);
}

Stage Pipeline::SortPairs(const PipelineInput& keys, const PipelineInput& values, bool descending, Return returns,
                          const ResidentOptions& keep) {
  return Sort(keys, &values, v1::SORT_OUTPUT_KEYS_AND_VALUES, descending, returns, keep);
}

// -- running it

PipelineResult Pipeline::Run(Progress progress) {
  // Return::kAuto: the stage's data comes back unless a later stage reads its arrays.
  std::vector<bool> read(stages_.size(), false);
  for (const v1::PipelineStage& s : header_.stages()) {
    for (const v1::StageInput* in : {&s.values(), &s.flags(), &s.keys(), &s.sort_values()}) {
      if (in->source_case() == v1::StageInput::kStage && in->stage() < read.size()) read[in->stage()] = true;
    }
  }
  for (size_t i = 0; i < returns_.size(); ++i) {
    if (returns_[i] != Return::kAuto) continue;
    returns_[i] = read[i] ? Return::kNone : Return::kData;
    header_.mutable_stages(static_cast<int>(i))->set_returns(pipeline_detail::ToProto(returns_[i]));
  }
  const char* data = static_cast<const char*>(input_);
  const size_t bytes = input_bytes_;
  Replay input;
  if (has_input_) input = [data, bytes] { return Source(SourceAt::Memory(data, bytes)); };
  std::vector<v1::PipelineResponse> responses = client_->PipelineStream(header_, input, std::move(progress));

  const uint32_t count = static_cast<uint32_t>(stages_.size());
  PipelineResult result;
  result.pipeline_ = serial_;
  result.stages_.resize(count);
  // The kept arrays first, owned at once: whatever is wrong below, none is left behind.
  for (const v1::PipelineResponse& r : responses) {
    if (r.stage() >= count) continue;
    auto& kept = result.stages_[r.stage()].kept;
    auto own = [&](v1::StageArray a, bool has, const v1::ArrayInfo& info) {
      if (has && !kept[a]) kept[a] = RemoteArray(*client_, info);
    };
    own(v1::STAGE_ARRAY_VALUES, r.scan().has_array(), r.scan().array());
    own(v1::STAGE_ARRAY_VALUES, r.compact().has_values_array(), r.compact().values_array());
    own(v1::STAGE_ARRAY_INDICES, r.compact().has_indices_array(), r.compact().indices_array());
    own(v1::STAGE_ARRAY_VALUES, r.sort().has_keys_array(), r.sort().keys_array());
    own(v1::STAGE_ARRAY_INDICES, r.sort().has_indices_array(), r.sort().indices_array());
    own(v1::STAGE_ARRAY_SORT_VALUES, r.sort().has_values_array(), r.sort().values_array());
  }
  if (responses.empty() || responses.back().stage() != count) {
    throw pipeline_detail::Malformed("no final response (stage " + std::to_string(count) + ")");
  }
  // Stage by stage, in order: its data pieces, then its final response.
  std::vector<bool> seen(count, false);
  uint32_t at = 0;
  for (size_t i = 0; i + 1 < responses.size(); ++i) {
    v1::PipelineResponse& r = responses[i];
    if (r.stage() < at || r.stage() >= count) {
      throw pipeline_detail::Malformed("a response of stage " + std::to_string(r.stage()) + " after stage " +
                                       std::to_string(at));
    }
    at = r.stage();
    seen[at] = true;
    PipelineResult::StageResult& s = result.stages_[at];
    const std::array<v1::DType, 3>& makes = stages_[at].makes_;
    auto append = [&](v1::StageArray a, const std::string& piece, uint64_t offset) {
      pipeline_detail::Append(&s.data[a], piece, offset, DTypeSize(makes[a]), at, a);
    };
    switch (r.result_case()) {
      case v1::PipelineResponse::kScan: append(v1::STAGE_ARRAY_VALUES, r.scan().data(), r.scan().offset()); break;
      case v1::PipelineResponse::kCompact:
        append(v1::STAGE_ARRAY_VALUES, r.compact().values(), r.compact().kept_offset());
        append(v1::STAGE_ARRAY_INDICES, r.compact().indices(), r.compact().kept_offset());
        break;
      case v1::PipelineResponse::kSort:
        append(v1::STAGE_ARRAY_VALUES, r.sort().keys(), r.sort().offset());
        append(v1::STAGE_ARRAY_INDICES, r.sort().indices(), r.sort().offset());
        append(v1::STAGE_ARRAY_SORT_VALUES, r.sort().values(), r.sort().offset());
        break;
      default: break;
    }
    s.final = std::move(r);  // the stage's last response is its final one (it carries no data)
  }
  result.timing_ = FromProto(responses.back().timing());
  // Every array a stage returns or keeps came, whole.
  for (uint32_t i = 0; i < count; ++i) {
    if (!seen[i]) throw pipeline_detail::Malformed("no response of stage " + std::to_string(i));
    PipelineResult::StageResult& s = result.stages_[i];
    s.returns = returns_[i];
    if (s.returns == Return::kNone) continue;
    const uint64_t n = result.Count(stages_[i]);
    for (int a = 0; a < 3; ++a) {
      const v1::DType dtype = stages_[i].makes_[a];
      if (dtype == v1::DTYPE_UNSPECIFIED) continue;
      const auto array = static_cast<v1::StageArray>(a);
      if (s.returns == Return::kKeep && !s.kept[a]) {
        throw pipeline_detail::Malformed("stage " + std::to_string(i) + " kept no " +
                                         pipeline_detail::ArrayName(array) + " array");
      }
      if (s.returns == Return::kData && s.data[a].size() != n * DTypeSize(dtype)) {
        throw pipeline_detail::Malformed("stage " + std::to_string(i) + " returned " +
                                         std::to_string(s.data[a].size()) + " bytes of " +
                                         pipeline_detail::ArrayName(array) + " for " + std::to_string(n) + " elements");
      }
    }
  }
  return result;
}

// -- the results

const PipelineResult::StageResult& PipelineResult::Of(const Stage& s) const {
  if (s.pipeline_ == 0 || s.pipeline_ != pipeline_) {
    throw std::invalid_argument("gpuscan: PipelineResult: a Stage of another Pipeline");
  }
  if (s.index_ >= stages_.size()) {
    throw std::invalid_argument("gpuscan: PipelineResult: " + pipeline_detail::StageText(s) +
                                " was added after the Run");
  }
  return stages_[s.index_];
}

void PipelineResult::WrongType(const Stage& s, v1::DType want) {
  throw std::invalid_argument(
      "gpuscan: PipelineResult: " + pipeline_detail::StageText(s) + "'s " + pipeline_detail::ArrayName(s.array()) +
      " " +
      (s.dtype() == v1::DTYPE_UNSPECIFIED ? std::string("is no array it makes") : "hold " + v1::DType_Name(s.dtype())) +
      ", not " + v1::DType_Name(want));
}

RemoteArray PipelineResult::Array(const Stage& s) {
  StageResult& r = stages_[&Of(s) - stages_.data()];
  if (r.returns != Return::kKeep) {
    throw std::invalid_argument("gpuscan: PipelineResult::Array: " + pipeline_detail::StageText(s) +
                                " did not keep its arrays "
                                "(Return::kKeep)");
  }
  if (!s.makes(s.array())) {
    throw std::invalid_argument("gpuscan: PipelineResult::Array: " + pipeline_detail::StageText(s) + " makes no " +
                                pipeline_detail::ArrayName(s.array()));
  }
  if (r.taken[s.array()]) {
    throw std::logic_error("gpuscan: PipelineResult::Array: " + pipeline_detail::StageText(s) + "'s " +
                           pipeline_detail::ArrayName(s.array()) + " was taken already");
  }
  r.taken[s.array()] = true;
  return std::move(r.kept[s.array()]);
}

const std::string& PipelineResult::RawData(const Stage& s) const {
  const StageResult& r = Of(s);
  if (r.returns != Return::kData) {
    throw std::invalid_argument("gpuscan: PipelineResult::Data: " + pipeline_detail::StageText(s) +
                                " did not return its data (Return::kData; by default, Return::kAuto, "
                                "a stage returns it when no later stage reads it)");
  }
  if (!s.makes(s.array())) {
    throw std::invalid_argument("gpuscan: PipelineResult::Data: " + pipeline_detail::StageText(s) + " makes no " +
                                pipeline_detail::ArrayName(s.array()));
  }
  return r.data[s.array()];
}

void PipelineResult::RawValue(const Stage& s, v1::DType want, void* out, size_t size) const {
  const StageResult& r = Of(s);
  if (!r.final.has_reduce()) {
    throw std::invalid_argument("gpuscan: PipelineResult::Value: " + pipeline_detail::StageText(s) + " is no Reduce");
  }
  // A narrow input's value is of its accumulator's dtype (numpy's default, as a Scan's result).
  const v1::DType value = pipeline_detail::ScanResultDType(s.input_dtype_, v1::DTYPE_UNSPECIFIED);
  if (value != want) {
    throw std::invalid_argument("gpuscan: PipelineResult::Value: " + pipeline_detail::StageText(s) + " reduced " +
                                v1::DType_Name(s.input_dtype_) + " into " + v1::DType_Name(value) + ", not " +
                                v1::DType_Name(want));
  }
  const v1::ReduceResponse& reduce = r.final.reduce();
  if (reduce.raw_value().size() != size) {
    throw pipeline_detail::Malformed("stage " + std::to_string(s.index_) + "'s value: " +
                                     std::to_string(reduce.raw_value().size()) + " bytes, not " + std::to_string(size));
  }
  std::memcpy(out, reduce.raw_value().data(), size);
}

HistogramResult PipelineResult::Histogram(const Stage& s) const {
  const StageResult& r = Of(s);
  if (!r.final.has_histogram()) {
    throw std::invalid_argument("gpuscan: PipelineResult::Histogram: " + pipeline_detail::StageText(s) +
                                " is no Histogram");
  }
  return ToHistogramResult(r.final.histogram());
}

uint64_t PipelineResult::Count(const Stage& s) const {
  const v1::PipelineResponse& f = Of(s).final;
  switch (f.result_case()) {
    case v1::PipelineResponse::kScan: return f.scan().element_count();
    case v1::PipelineResponse::kReduce: return f.reduce().element_count();
    case v1::PipelineResponse::kCompact: return f.compact().kept_count();
    case v1::PipelineResponse::kHistogram: return f.histogram().element_count();
    case v1::PipelineResponse::kSort: return f.sort().element_count();
    case v1::PipelineResponse::RESULT_NOT_SET: break;
  }
  return 0;
}

gpuscan::Timing PipelineResult::Timing(const Stage& s) const {
  const v1::PipelineResponse& f = Of(s).final;
  switch (f.result_case()) {
    case v1::PipelineResponse::kScan: return FromProto(f.scan().timing());
    case v1::PipelineResponse::kReduce: return FromProto(f.reduce().timing());
    case v1::PipelineResponse::kCompact: return FromProto(f.compact().timing());
    case v1::PipelineResponse::kHistogram: return FromProto(f.histogram().timing());
    case v1::PipelineResponse::kSort: return FromProto(f.sort().timing());
    case v1::PipelineResponse::RESULT_NOT_SET: break;
  }
  return {};
}

const v1::PipelineResponse& PipelineResult::Final(const Stage& s) const { return Of(s).final; }

}  // namespace gpuscan
