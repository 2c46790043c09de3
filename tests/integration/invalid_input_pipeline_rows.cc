// The bad-input matrix: Pipeline. Every refusal of the plan (service/pipeline_plan.cc: the header
// checked whole before anything runs) and of the handler (pipeline_handler.cc: the resident ids,
// header.input and its chunks through PutChecks, data without header.input) and of a stage when
// it runs (pipeline_stages.cc: counts that depend on the data), each naming its field and value.
// Ids: kPreparedStageId becomes an id of this run that names no array (Row::same_epoch) or the
// default tenant's array of 16 INT32 elements (Row::foreign_id; as another tenant, NOT_FOUND).
// The results of valid pipelines are pipeline_test.cc's; the stream's own checks (header missing,
// repeated, empty stream) are shared with every streaming call and have a row here too.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "engine/types.h"
#include "invalid_input_matrix.h"

namespace gpuscan::matrix {
// A namespace of its own: the unity build puts this file beside the other rows files.
namespace pipeline_rows {
namespace {

using P = std::vector<v1::PipelineRequest>;
constexpr auto kNotFound = grpc::StatusCode::NOT_FOUND;

// An id of another run of the server (its last 8 bytes are not this run's epoch, but with chance
// 2^-64), and its hex as messages print it.
const std::string kOtherRunId(24, '\x3c');
std::string OtherRunHex() {
  std::string s;
  for (size_t i = 0; i < kOtherRunId.size(); ++i) s += "3c";
  return s;
}

v1::StageInput Id(const std::string& id = kOtherRunId) {
  v1::StageInput in;
  in.set_id(id);
  return in;
}
v1::StageInput FromStage(uint32_t stage, int array = v1::STAGE_ARRAY_VALUES) {
  v1::StageInput in;
  in.set_stage(stage);
  in.set_array(static_cast<v1::StageArray>(array));
  return in;
}
v1::StageInput Streamed(bool value = true) {
  v1::StageInput in;
  in.set_streamed(value);
  return in;
}

v1::PipelineStage Scan(v1::StageInput values, v1::DType dtype = v1::DTYPE_INT32, int op = v1::OPERATOR_SUM) {
  v1::PipelineStage s;
  s.mutable_scan()->set_dtype(dtype);
  s.mutable_scan()->set_op(static_cast<v1::Operator>(op));
  *s.mutable_values() = std::move(values);
  return s;
}
v1::PipelineStage Reduce(v1::StageInput values, v1::DType dtype = v1::DTYPE_INT32, int op = v1::OPERATOR_SUM) {
  v1::PipelineStage s;
  s.mutable_reduce()->set_dtype(dtype);
  s.mutable_reduce()->set_op(static_cast<v1::Operator>(op));
  *s.mutable_values() = std::move(values);
  return s;
}
// Compact selecting x > threshold (int dtypes), or by flags when `flags` is given.
v1::PipelineStage Compact(v1::StageInput values, v1::DType dtype = v1::DTYPE_INT32,
                          int output = v1::COMPACT_OUTPUT_VALUES, std::optional<v1::StageInput> flags = std::nullopt,
                          int64_t threshold = 0) {
  v1::PipelineStage s;
  v1::CompactHeader* h = s.mutable_compact();
  h->set_dtype(dtype);
  h->set_output(static_cast<v1::CompactOutput>(output));
  if (flags) {
    h->set_use_flags(true);
    *s.mutable_flags() = *flags;
  } else {
    h->mutable_predicate()->set_op(v1::PREDICATE_OP_GT);
    h->mutable_predicate()->mutable_threshold()->set_int_value(threshold);
  }
  *s.mutable_values() = std::move(values);
  return s;
}
v1::PipelineStage Histogram(v1::StageInput values, v1::DType dtype = v1::DTYPE_INT32, uint32_t bins = 8, double lo = 0,
                            double hi = 64) {
  v1::PipelineStage s;
  v1::HistogramHeader* h = s.mutable_histogram();
  h->set_dtype(dtype);
  h->set_bins(bins);
  h->set_lo(lo);
  h->set_hi(hi);
  *s.mutable_values() = std::move(values);
  return s;
}
v1::PipelineStage Sort(v1::StageInput keys, v1::DType dtype = v1::DTYPE_INT32, int output = v1::SORT_OUTPUT_KEYS,
                       int values_dtype = v1::DTYPE_UNSPECIFIED, std::optional<v1::StageInput> values = std::nullopt) {
  v1::PipelineStage s;
  s.mutable_sort()->set_dtype(dtype);
  s.mutable_sort()->set_output(static_cast<v1::SortOutput>(output));
  s.mutable_sort()->set_values_dtype(static_cast<v1::DType>(values_dtype));
  *s.mutable_values() = std::move(keys);
  if (values) *s.mutable_sort_values() = *values;
  return s;
}
// SegmentedScan by keys of key_dtype (or, with key_dtype 0, by head flags).
v1::PipelineStage Segmented(v1::StageInput values, std::optional<v1::StageInput> segments,
                            v1::DType dtype = v1::DTYPE_INT32, int key_dtype = v1::DTYPE_INT32) {
  v1::PipelineStage s;
  v1::SegmentedScanHeader* h = s.mutable_segmented_scan();
  h->set_dtype(dtype);
  h->set_op(v1::OPERATOR_SUM);
  if (key_dtype) {
    h->set_key_dtype(static_cast<v1::DType>(key_dtype));
    if (segments) *s.mutable_keys() = *segments;
  } else {
    h->set_heads(true);
    if (segments) *s.mutable_flags() = *segments;
  }
  *s.mutable_values() = std::move(values);
  return s;
}

// The first request: the stages, and header.input when input_dtype is set.
v1::PipelineRequest Head(std::vector<v1::PipelineStage> stages, std::optional<int> input_dtype = std::nullopt,
                         std::optional<uint64_t> input_count = std::nullopt) {
  v1::PipelineRequest r;
  for (v1::PipelineStage& s : stages) *r.mutable_header()->add_stages() = std::move(s);
  if (input_dtype) r.mutable_header()->mutable_input()->set_dtype(static_cast<v1::DType>(*input_dtype));
  if (input_count) r.mutable_header()->mutable_input()->set_element_count(*input_count);
  if (!r.has_header()) r.mutable_header();  // a header with no stages is still a header
  return r;
}
v1::PipelineRequest Chunk(size_t bytes) {
  v1::PipelineRequest r;
  r.set_data(Bytes(bytes));
  return r;
}
v1::PipelineRequest WithData(v1::PipelineRequest r, size_t bytes) {
  r.set_data(Bytes(bytes));
  return r;
}

Row PipeRow(std::string name, P requests, grpc::StatusCode code, std::vector<std::string> expect) {
  return MakeRow(std::move(name), std::move(requests), code, std::move(expect));
}
Row AsTenant(Row row, size_t bytes) {
  row.metadata.emplace_back("gpuscan-tenant", std::string(bytes, 't'));
  return row;
}
// The row names the default tenant's array (16 INT32 elements) by kPreparedStageId, as its own.
Row OwnArray(Row row) {
  row.foreign_id = true;
  return row;
}

// ---- the header as a whole, each stage's operation header
void HeaderRows(std::vector<Row>& rows) {
  rows.push_back(PipeRow("EmptyStages", P{Head({})}, kInvalid, {"header.stages: empty", "at least one stage"}));
  {
    std::vector<v1::PipelineStage> stages(65, Scan(Id()));
    rows.push_back(PipeRow("TooManyStages", P{Head(stages)}, kInvalid,
                           {"header.stages: 65 stages; at most 64 (Limits.max_pipeline_stages)"}));
  }
  {
    v1::PipelineStage none;
    *none.mutable_values() = Id();
    rows.push_back(PipeRow("NoOperation", P{Head({Scan(Id()), none})}, kInvalid,
                           {"header.stages[1]: no operation set", "scan, reduce, compact"}));
  }
  // What says where the data is: a stage's inputs say it instead.
  {
    v1::PipelineStage s = Scan(Id());
    s.mutable_scan()->mutable_resident()->set_values(kOtherRunId);
    rows.push_back(PipeRow("StageResident", P{Head({s})}, kInvalid,
                           {"header.stages[0].scan.resident: not in a pipeline stage"}));
  }
  {
    v1::PipelineStage s = Scan(Id());
    s.mutable_scan()->mutable_shared_memory()->set_region("in64");
    s.mutable_scan()->mutable_shared_memory()->set_bytes(64);
    rows.push_back(PipeRow("StageSharedMemory", P{Head({s})}, kInvalid,
                           {"header.stages[0].scan.shared_memory: not in a pipeline stage"}));
  }
  {
    v1::PipelineStage s = Sort(Id());
    s.mutable_sort()->mutable_device_memory()->set_handle(std::string(64, '\x11'));
    rows.push_back(PipeRow("StageDeviceMemory", P{Head({Scan(Id()), s})}, kInvalid,
                           {"header.stages[1].sort.device_memory: not in a pipeline stage"}));
  }
  {
    v1::PipelineStage s = Compact(Id());
    s.mutable_compact()->mutable_lanes()->set_lane_count(2);
    rows.push_back(PipeRow("StageLanes", P{Head({s})}, kInvalid,
                           {"header.stages[0].compact.lanes: not in a pipeline stage"}));
  }
  {  // A stage's carry is checked as Scan's (the stage runs it: PipelineTest.ScanStageFoldsItsCarry)
    v1::PipelineStage s = Scan(Id());
    s.mutable_scan()->set_carry(std::string(2, '\x03'));
    rows.push_back(PipeRow("StageCarryNotOneElement", P{Head({s})}, kInvalid,
                           {"header.stages[0].scan.carry has 2 bytes", "one int32 element"}));
  }
  // Narrow dtypes: checked as their operation's call checks them; a narrow scan's result is wide.
  {
    v1::PipelineStage s = Scan(Id(), v1::DTYPE_INT8);
    s.mutable_scan()->set_output_dtype(v1::DTYPE_INT16);
    rows.push_back(PipeRow("StageNarrowOutputDType", P{Head({s})}, kInvalid,
                           {"header.stages[0].scan.output_dtype=DTYPE_INT16", "FLOAT16 input only"}));
  }
  rows.push_back(PipeRow("StageNarrowBitwiseOnHalf", P{Head({Reduce(Id(), v1::DTYPE_FLOAT16, v1::OPERATOR_BIT_AND)})},
                         kInvalid, {"header.stages[0].reduce.op=OPERATOR_BIT_AND is not defined for dtype float16"}));
  rows.push_back(PipeRow("StageNarrowScanIsWide", P{Head({Scan(Id(), v1::DTYPE_INT8), Reduce(FromStage(0), v1::DTYPE_INT8)})},
                         kInvalid, {"header.stages[1].values: stage 0's STAGE_ARRAY_VALUES is DTYPE_INT64",
                                    "this input must be DTYPE_INT8"}));
  rows.push_back(PipeRow("StageNarrowIdOfAnotherRun",
                         P{Head({Sort(Id(), v1::DTYPE_FLOAT16, v1::SORT_OUTPUT_KEYS_AND_VALUES, v1::DTYPE_INT16, Id())})},
                         kNotFound, {"header.stages[0].values", "the server restarted"}));
  // The operation's own parameters, as its RPC checks them, named from the stage.
  rows.push_back(PipeRow("StageBitwiseOnFloat", P{Head({Scan(Id()), Scan(Id(), v1::DTYPE_FLOAT32, v1::OPERATOR_BIT_AND)})},
                         kInvalid, {"header.stages[1].scan.op=OPERATOR_BIT_AND is not defined for dtype float32"}));
  rows.push_back(PipeRow("StageReduceBitwiseOnFloat", P{Head({Reduce(Id(), v1::DTYPE_FLOAT64, v1::OPERATOR_BIT_XOR)})},
                         kInvalid, {"header.stages[0].reduce.op=OPERATOR_BIT_XOR is not defined for dtype float64"}));
  rows.push_back(PipeRow("StageUnknownDType", P{Head({Scan(Id(), static_cast<v1::DType>(42))})}, kInvalid,
                         {"header.stages[0].scan.dtype=42 is not a known DType"}));
  rows.push_back(PipeRow("StageUnknownOperator", P{Head({Reduce(Id(), v1::DTYPE_INT64, 99)})}, kInvalid,
                         {"header.stages[0].reduce.op=99 is not a known Operator"}));
  rows.push_back(PipeRow("StageHistogramBinsZero", P{Head({Histogram(Id(), v1::DTYPE_INT32, 0)})}, kInvalid,
                         {"header.stages[0].histogram", "neither bins nor edges (bins=0 with no edges)"}));
  rows.push_back(PipeRow("StageHistogramLoNotBelowHi", P{Head({Histogram(Id(), v1::DTYPE_FLOAT64, 4, 3, 3)})},
                         kInvalid, {"header.stages[0].histogram.lo=3 must be below", "hi=3"}));
  {
    v1::PipelineStage s = Compact(Id());
    s.mutable_compact()->clear_predicate();
    rows.push_back(PipeRow("StageCompactNoSelector", P{Head({s})}, kInvalid,
                           {"header.stages[0].compact", "has no selector"}));
  }
  rows.push_back(PipeRow("StageSortUnknownOutput", P{Head({Sort(Id(), v1::DTYPE_FLOAT64, 9)})}, kInvalid,
                         {"header.stages[0].sort.output=9 is not a known SortOutput"}));
  {
    v1::PipelineStage s = Segmented(Id(), Id());
    s.mutable_segmented_scan()->clear_key_dtype();
    s.clear_keys();
    rows.push_back(PipeRow("StageSegmentedNoSegments", P{Head({s})}, kInvalid,
                           {"header.stages[0].segmented_scan", "neither key_dtype nor heads"}));
  }
  // An algorithm this engine lacks (the runner picks it, and expects its name and the engine's).
  {
    Row row = PipeRow("StageAlgorithmMissing", P{Head({Scan(Id())})}, kUnimplemented, {"header.stages[0].scan.algorithm"});
    row.missing_algorithm = true;
    rows.push_back(row);
  }
  // Returns: a reduction and a histogram answer values, not arrays.
  {
    v1::PipelineStage s = Reduce(Id());
    s.set_returns(v1::STAGE_RETURN_DATA);
    rows.push_back(PipeRow("ReduceReturnsData", P{Head({s})}, kInvalid,
                           {"header.stages[0].returns: a reduce stage answers values in its final response"}));
  }
  {
    v1::PipelineStage s = Histogram(Id());
    s.set_returns(v1::STAGE_RETURN_KEEP);
    rows.push_back(PipeRow("HistogramReturnsKeep", P{Head({Scan(Id()), s})}, kInvalid,
                           {"header.stages[1].returns: a histogram stage answers values"}));
  }
  {
    v1::PipelineStage s = Scan(Id());
    s.set_returns(static_cast<v1::StageReturn>(5));
    rows.push_back(PipeRow("UnknownReturn", P{Head({s})}, kInvalid, {"header.stages[0].returns: 5 is not a StageReturn"}));
  }
  {
    v1::PipelineStage s = Scan(Id());
    s.set_returns(v1::STAGE_RETURN_KEEP);
    s.set_label(std::string(129, 'l'));
    rows.push_back(PipeRow("LabelTooLong", P{Head({s})}, kInvalid, {"header.stages[0].label has 129 bytes; at most 128"}));
  }
}

// ---- each stage's inputs: the ones its header asks for, where they come from, their dtypes
void InputRows(std::vector<Row>& rows) {
  {
    v1::PipelineStage s = Scan(Id());
    s.clear_values();
    rows.push_back(PipeRow("ValuesMissing", P{Head({s})}, kInvalid,
                           {"header.stages[0].values: required (the array the header's dtype describes)"}));
    *s.mutable_values() = v1::StageInput();  // present, but no source
    rows.push_back(PipeRow("ValuesNoSource", P{Head({s})}, kInvalid, {"header.stages[0].values: required"}));
  }
  rows.push_back(PipeRow("FlagsMissing", P{Head({Compact(Id(), v1::DTYPE_INT32, v1::COMPACT_OUTPUT_VALUES, Id())})},
                         kInvalid, {}));
  rows.back().pipeline[0].mutable_header()->mutable_stages(0)->clear_flags();
  rows.back().expect = {"header.stages[0].flags: required (use_flags or heads)"};
  rows.push_back(PipeRow("KeysMissing", P{Head({Segmented(Id(), std::nullopt, v1::DTYPE_INT32, v1::DTYPE_INT64)})},
                         kInvalid, {"header.stages[0].keys: required (key_dtype)"}));
  rows.push_back(PipeRow("HeadsMissing", P{Head({Scan(Id()), Segmented(FromStage(0), std::nullopt, v1::DTYPE_INT32, 0)})},
                         kInvalid, {"header.stages[1].flags: required (use_flags or heads)"}));
  rows.push_back(PipeRow("SortValuesMissing",
                         P{Head({Sort(Id(), v1::DTYPE_INT32, v1::SORT_OUTPUT_KEYS_AND_VALUES, v1::DTYPE_INT64)})}, kInvalid,
                         {"header.stages[0].sort_values: required (output SORT_OUTPUT_KEYS_AND_VALUES)"}));
  {
    v1::PipelineStage s = Scan(Id());
    *s.mutable_keys() = Id();
    rows.push_back(PipeRow("KeysNotTaken", P{Head({s})}, kInvalid,
                           {"header.stages[0].keys: this stage takes no such input (only with key_dtype)"}));
  }
  {
    v1::PipelineStage s = Compact(Id());
    *s.mutable_flags() = Id();
    rows.push_back(PipeRow("FlagsNotTaken", P{Head({s})}, kInvalid,
                           {"header.stages[0].flags: this stage takes no such input (only with use_flags or heads)"}));
  }
  {
    v1::PipelineStage s = Sort(Id(), v1::DTYPE_INT32, v1::SORT_OUTPUT_INDICES);
    *s.mutable_sort_values() = Id();
    rows.push_back(PipeRow("SortValuesNotTaken", P{Head({s})}, kInvalid,
                           {"header.stages[0].sort_values: this stage takes no such input"}));
  }
  {
    v1::StageInput in = Id();
    in.set_array(v1::STAGE_ARRAY_INDICES);
    rows.push_back(PipeRow("ArrayWithoutStage", P{Head({Scan(in)})}, kInvalid,
                           {"header.stages[0].values.array: only with stage"}));
  }
  // Ids: of an id's length, before any is looked up.
  rows.push_back(PipeRow("IdShort", P{Head({Scan(Id("\x01\x02\x03\x04\x05"))})}, kInvalid,
                         {"header.stages[0].values.id: 5 bytes; an array id has 24"}));
  rows.push_back(PipeRow("IdEmpty", P{Head({Scan(Id(""))})}, kInvalid,
                         {"header.stages[0].values.id: 0 bytes; an array id has 24"}));
  rows.push_back(PipeRow("IdLong", P{Head({Scan(Id(), v1::DTYPE_INT64), Scan(Id(kOtherRunId + "\x3c"), v1::DTYPE_INT64)})},
                         kInvalid, {"header.stages[1].values.id: 25 bytes; an array id has 24"}));
  rows.push_back(PipeRow("StreamedFalse", P{Head({Scan(Streamed(false))}, v1::DTYPE_INT32)}, kInvalid,
                         {"header.stages[0].values.streamed: false; set it true or name another source"}));
  // Earlier stages only: a cycle needs a reference to the stage itself or a later one.
  rows.push_back(PipeRow("ForwardReference", P{Head({Scan(FromStage(1)), Scan(Id())})}, kInvalid,
                         {"header.stages[0].values.stage: 1 is not an earlier stage"}));
  rows.push_back(PipeRow("SelfReference", P{Head({Scan(Id()), Scan(FromStage(1))})}, kInvalid,
                         {"header.stages[1].values.stage: 1 is not an earlier stage (stage 1 may read stages 0 to 0)"}));
  rows.push_back(PipeRow("ForwardReferenceOfKeys",
                         P{Head({Scan(Id()), Segmented(FromStage(0), FromStage(7)), Scan(Id())})}, kInvalid,
                         {"header.stages[1].keys.stage: 7 is not an earlier stage"}));
  rows.push_back(PipeRow("UnknownStageArray", P{Head({Scan(Id()), Scan(FromStage(0, 7))})}, kInvalid,
                         {"header.stages[1].values.array: 7 is not a StageArray"}));
  rows.push_back(PipeRow("NegativeStageArray", P{Head({Scan(Id()), Scan(FromStage(0, -1))})}, kInvalid,
                         {"header.stages[1].values.array: -1 is not a StageArray"}));
  // An array the stage read does not make.
  rows.push_back(PipeRow("ReduceMakesNoArray", P{Head({Reduce(Id()), Scan(FromStage(0))})}, kInvalid,
                         {"header.stages[1].values: stage 0 (reduce) makes no STAGE_ARRAY_VALUES"}));
  rows.push_back(PipeRow("HistogramMakesNoArray", P{Head({Histogram(Id()), Scan(FromStage(0))})}, kInvalid,
                         {"header.stages[1].values: stage 0 (histogram) makes no STAGE_ARRAY_VALUES"}));
  rows.push_back(PipeRow("ScanMakesNoIndices", P{Head({Scan(Id()), Scan(FromStage(0, v1::STAGE_ARRAY_INDICES))})},
                         kInvalid, {"header.stages[1].values: stage 0 (scan) makes no STAGE_ARRAY_INDICES"}));
  rows.push_back(PipeRow("CompactValuesMakesNoIndices",
                         P{Head({Compact(Id()), Reduce(FromStage(0, v1::STAGE_ARRAY_INDICES), v1::DTYPE_INT64)})},
                         kInvalid, {"header.stages[1].values: stage 0 (compact) makes no STAGE_ARRAY_INDICES"}));
  rows.push_back(PipeRow("SortIndicesMakesNoKeys",
                         P{Head({Sort(Id(), v1::DTYPE_INT32, v1::SORT_OUTPUT_INDICES), Scan(FromStage(0))})}, kInvalid,
                         {"header.stages[1].values: stage 0 (sort) makes no STAGE_ARRAY_VALUES"}));
  rows.push_back(PipeRow("SortKeysMakesNoSortValues",
                         P{Head({Sort(Id()), Scan(FromStage(0, v1::STAGE_ARRAY_SORT_VALUES))})}, kInvalid,
                         {"header.stages[1].values: stage 0 (sort) makes no STAGE_ARRAY_SORT_VALUES"}));
  // An earlier stage's array of another dtype than the input must have.
  rows.push_back(PipeRow("ValuesDTypeOfStage",
                         P{Head({Compact(Id(), v1::DTYPE_INT32, v1::COMPACT_OUTPUT_INDICES),
                                 Scan(FromStage(0, v1::STAGE_ARRAY_INDICES))})},
                         kInvalid,
                         {"header.stages[1].values: stage 0's STAGE_ARRAY_INDICES is DTYPE_INT64; this input must be "
                          "DTYPE_INT32"}));
  rows.push_back(PipeRow("KeysDTypeOfStage",
                         P{Head({Scan(Id(), v1::DTYPE_INT64), Segmented(Id(), FromStage(0), v1::DTYPE_INT32, v1::DTYPE_INT32)})},
                         kInvalid,
                         {"header.stages[1].keys: stage 0's STAGE_ARRAY_VALUES is DTYPE_INT64; this input must be "
                          "DTYPE_INT32"}));
  rows.push_back(PipeRow("FlagsOfStage",
                         P{Head({Scan(Id()), Compact(Id(), v1::DTYPE_INT32, v1::COMPACT_OUTPUT_VALUES, FromStage(0))})},
                         kInvalid,
                         {"header.stages[1].flags: stage 0's STAGE_ARRAY_VALUES is DTYPE_INT32; this input must be one "
                          "byte an element (UINT8 or INT8)"}));
  rows.push_back(PipeRow("HeadsOfStage", P{Head({Scan(Id(), v1::DTYPE_INT64), Segmented(Id(), FromStage(0), v1::DTYPE_INT32, 0)})},
                         kInvalid, {"header.stages[1].flags: stage 0's STAGE_ARRAY_VALUES is DTYPE_INT64", "UINT8 or INT8"}));
  rows.push_back(PipeRow("SortValuesDTypeOfStage",
                         P{Head({Sort(Id(), v1::DTYPE_INT32, v1::SORT_OUTPUT_INDICES),
                                 Sort(Id(), v1::DTYPE_INT32, v1::SORT_OUTPUT_KEYS_AND_VALUES, v1::DTYPE_FLOAT64,
                                      FromStage(0, v1::STAGE_ARRAY_INDICES))})},
                         kInvalid,
                         {"header.stages[1].sort_values: stage 0's STAGE_ARRAY_INDICES is DTYPE_INT64; this input must "
                          "be DTYPE_FLOAT64"}));
}

// ---- the streamed input: header.input (checked as PutArray's header) and its chunks
void StreamedRows(std::vector<Row>& rows) {
  rows.push_back(PipeRow("StreamedWithoutInput", P{Head({Scan(Streamed())})}, kInvalid,
                         {"header.stages[0].values.streamed: the pipeline has no streamed input (header.input)"}));
  rows.push_back(PipeRow("InputUnread", P{Head({Scan(Id())}, v1::DTYPE_INT32), Chunk(16)}, kInvalid,
                         {"header.input: set, but no stage reads it (StageInput.streamed)"}));
  rows.push_back(PipeRow("InputDTypeDiffers", P{Head({Scan(Streamed())}, v1::DTYPE_INT64), Chunk(16)}, kInvalid,
                         {"header.stages[0].values.streamed: header.input.dtype is DTYPE_INT64; this input must be "
                          "DTYPE_INT32"}));
  rows.push_back(PipeRow("InputDTypeUnknown", P{Head({Scan(Streamed())}, 99), Chunk(16)}, kInvalid,
                         {"header.stages[0].values.streamed: header.input.dtype is 99"}));
  rows.push_back(PipeRow("InputDTypeUnspecified", P{Head({Scan(Streamed())}, v1::DTYPE_UNSPECIFIED), Chunk(16)},
                         kInvalid, {"header.stages[0].values.streamed: header.input.dtype is DTYPE_UNSPECIFIED"}));
  rows.push_back(PipeRow("StreamedFlagsNotOneByte",
                         P{Head({Compact(Id(), v1::DTYPE_INT32, v1::COMPACT_OUTPUT_VALUES, Streamed())}, v1::DTYPE_INT32)},
                         kInvalid,
                         {"header.stages[0].flags.streamed: header.input.dtype is DTYPE_INT32; this input must be UINT8 "
                          "or INT8"}));
  {
    v1::PipelineRequest head = Head({Scan(Streamed())}, v1::DTYPE_INT32);
    head.mutable_header()->mutable_input()->set_label(std::string(129, 'l'));
    rows.push_back(PipeRow("InputLabelTooLong", P{head, Chunk(16)}, kInvalid,
                           {"header.input.label has 129 bytes; at most 128"}));
  }
  rows.push_back(PipeRow("InputCountAboveBudget",
                         P{Head({Scan(Streamed(), v1::DTYPE_INT64)}, v1::DTYPE_INT64, kResidentBytes / 8 + 1)}, kExhausted,
                         {"header.input.element_count " + std::to_string(kResidentBytes / 8 + 1) + " (8 bytes each)",
                          "resident budget of " + std::to_string(kResidentBytes) + " bytes (--resident-bytes)"}));
  // Within the budget, past the tenant's quota: refused when the input's memory is taken.
  rows.push_back(AsTenant(PipeRow("InputCountAboveTenantQuota",
                                  P{Head({Scan(Streamed())}, v1::DTYPE_INT32, kTenantQuotaBytes / 4 + 1), Chunk(kChunkBytes)},
                                  kExhausted,
                                  {"header.input", std::to_string(kTenantQuotaBytes + 4) +
                                                       " bytes more would pass this tenant's quota of " +
                                                       std::to_string(kTenantQuotaBytes) + " bytes (--tenant-quota-bytes)"}),
                          10));
  rows.push_back(PipeRow("InputCountLarger", P{Head({Scan(Streamed())}, v1::DTYPE_INT32, 100), Chunk(50 * 4)}, kInvalid,
                         {"header.input.element_count 100 but 50 elements arrived"}));
  rows.push_back(PipeRow("InputCountWithNoData", P{Head({Reduce(Streamed())}, v1::DTYPE_INT32, 3)}, kInvalid,
                         {"header.input.element_count 3 but 0 elements arrived"}));
  rows.push_back(PipeRow("InputCountSmaller", P{Head({Scan(Streamed())}, v1::DTYPE_INT32, 10), Chunk(50 * 4)}, kInvalid,
                         {"more elements arrived than header.input.element_count 10"}));
  rows.push_back(PipeRow("ChunkNotWholeElements", P{Head({Scan(Streamed(), v1::DTYPE_INT64)}, v1::DTYPE_INT64), Chunk(1023)},
                         kInvalid, {"data of request 1 has 1023 bytes, not a multiple of the element size 8 (DTYPE_INT64)"}));
  rows.push_back(PipeRow("FirstChunkNotWholeElements", P{WithData(Head({Scan(Streamed())}, v1::DTYPE_INT32), 7)}, kInvalid,
                         {"data of request 0 has 7 bytes, not a multiple of the element size 4 (DTYPE_INT32)"}));
  rows.push_back(PipeRow("ChunkAboveLimit", P{Head({Scan(Streamed())}, v1::DTYPE_INT32), Chunk(2 * kChunkBytes)},
                         kExhausted, {"data of request 1 has 8192 bytes; a chunk holds at most 4096 (Limits.max_chunk_bytes)"}));
  // (An array that is found: the ids are looked up before request #0's data is checked.)
  rows.push_back(OwnArray(PipeRow("DataWithoutInput", P{WithData(Head({Scan(Id(kPreparedStageId))}), 16)}, kInvalid,
                                  {"request #0: data, but the pipeline has no streamed input (header.input)"})));
  // The stream's shape (the checks every streaming call shares).
  rows.push_back(PipeRow("HeaderMissing", P{Chunk(16), Head({Scan(Streamed())}, v1::DTYPE_INT32)}, kInvalid,
                         {"header missing", "request #0"}));
  rows.push_back(PipeRow("HeaderRepeated",
                         P{Head({Scan(Streamed())}, v1::DTYPE_INT32), Chunk(16), Head({Scan(Streamed())}, v1::DTYPE_INT32)},
                         kInvalid, {"header repeated in request #2"}));
  rows.push_back(PipeRow("EmptyStream", P{}, kInvalid, {"empty stream", "first request (the header)"}));
}

// ---- resident inputs: looked up once the plan is whole; then what the data decides when a stage runs
void ResidentAndRunRows(std::vector<Row>& rows) {
  rows.push_back(PipeRow("UnknownId", P{Head({Scan(Id(kPreparedStageId))})}, kNotFound,
                         {"header.stages[0].values.id 6b6b6b6b", "no such resident array"}));
  rows.back().same_epoch = true;
  rows.push_back(PipeRow("IdOfAnotherRun", P{Head({Scan(Id()), Reduce(FromStage(0))})}, kNotFound,
                         {"header.stages[0].values.id " + OtherRunHex(), "the server restarted since this id was issued"}));
  // Another tenant's array, exactly as an unknown id (the runner checks the array is still there).
  rows.push_back(AsTenant(OwnArray(PipeRow("OtherTenantsArray", P{Head({Scan(Id(kPreparedStageId))})}, kNotFound,
                                           {"header.stages[0].values.id ", "no such resident array"})),
                          7));
  rows.push_back(AsTenant(PipeRow("TenantTooLong", P{Head({Scan(Id())})}, kInvalid,
                                  {"metadata gpuscan-tenant has 129 bytes; at most 128"}),
                          129));
  // The default tenant's own array (16 INT32 elements): found, and then of the wrong dtype or count.
  rows.push_back(OwnArray(PipeRow("SortValuesIdOfAnotherRun",
                                  P{Head({Sort(Id(kPreparedStageId), v1::DTYPE_INT32, v1::SORT_OUTPUT_KEYS_AND_VALUES,
                                               v1::DTYPE_INT32, Id())})},
                                  kNotFound,
                                  {"header.stages[0].sort_values.id " + OtherRunHex(), "the server restarted"})));
  rows.push_back(OwnArray(PipeRow("ResidentDTypeDiffers", P{Head({Scan(Id(kPreparedStageId), v1::DTYPE_INT64)})},
                                  kInvalid, {"header.stages[0].values.id ", "is DTYPE_INT32; this input must be DTYPE_INT64"})));
  rows.push_back(OwnArray(PipeRow(
      "ResidentFlagsNotOneByte",
      P{Head({Compact(Id(kPreparedStageId), v1::DTYPE_INT32, v1::COMPACT_OUTPUT_VALUES, Id(kPreparedStageId))})}, kInvalid,
      {"header.stages[0].flags.id ", "is DTYPE_INT32; this input must be UINT8 or INT8"})));
  rows.push_back(OwnArray(PipeRow(
      "ResidentKeysDType",
      P{Head({Segmented(Id(kPreparedStageId), Id(kPreparedStageId), v1::DTYPE_INT32, v1::DTYPE_INT64)})}, kInvalid,
      {"header.stages[0].keys.id ", "is DTYPE_INT32; this input must be DTYPE_INT64"})));
  {
    v1::PipelineStage s = Scan(Id(kPreparedStageId));
    s.mutable_scan()->set_element_count(5);
    rows.push_back(OwnArray(PipeRow("StageCountDiffers", P{Head({s})}, kInvalid,
                                    {"header.stages[0].scan.element_count 5 differs from its values' 16 elements "
                                     "(header.stages[0].values)"})));
  }
  {
    // The count of an earlier stage's array: known only once that stage ran.
    v1::PipelineStage r = Reduce(FromStage(0));
    r.mutable_reduce()->set_element_count(3);
    rows.push_back(PipeRow("StageCountDiffersFromStreamed", P{Head({Scan(Streamed()), r}, v1::DTYPE_INT32), Chunk(16 * 4)},
                           kInvalid,
                           {"header.stages[1].reduce.element_count 3 differs from its values' 16 elements "
                            "(header.stages[1].values)"}));
  }
  // Keys of another length than the values a compaction kept (the payload bytes are 0x03030303:
  // x > 0x03030303 keeps none of the 16).
  rows.push_back(PipeRow("KeysLengthDiffersFromKept",
                         P{Head({Compact(Streamed(), v1::DTYPE_INT32, v1::COMPACT_OUTPUT_VALUES, std::nullopt, 0x03030303),
                                 Segmented(FromStage(0), Streamed())},
                                v1::DTYPE_INT32),
                           Chunk(16 * 4)},
                         kInvalid,
                         {"header.stages[1].keys: 16 elements; the stage's values (header.stages[1].values) have 0"}));
  rows.push_back(OwnArray(PipeRow(
      "FlagsLengthDiffers",
      P{Head({Compact(Id(kPreparedStageId), v1::DTYPE_INT32, v1::COMPACT_OUTPUT_VALUES, Streamed())}, v1::DTYPE_UINT8),
        Chunk(10)},
      kInvalid, {"header.stages[0].flags: 10 elements; the stage's values (header.stages[0].values) have 16"})));
  rows.push_back(OwnArray(PipeRow(
      "SortValuesLengthDiffers",
      P{Head({Sort(Id(kPreparedStageId), v1::DTYPE_INT32, v1::SORT_OUTPUT_KEYS_AND_VALUES, v1::DTYPE_INT64, Streamed())},
             v1::DTYPE_INT64),
        Chunk(8 * 8)},
      kInvalid, {"header.stages[0].sort_values: 8 elements; the stage's values (header.stages[0].values) have 16"})));
}

}  // namespace

// Two defects the rows found, fixed in the server; these show the fixes. header.input's chunk checks
// are PutArray's (PutChecks::Chunk): their message must name header.input.element_count, not
// PutArray's header.element_count (PipelineHeader has none).
TEST(PipelineBadInput, PipelineInputCountSmallerNamesTheInput) {
  testing::TestServer server(MatrixServerOptions());
  auto stub = server.stub();
  grpc::ClientContext ctx;
  auto stream = stub->Pipeline(&ctx);
  stream->Write(Head({Scan(Streamed())}, v1::DTYPE_INT32, 10));
  stream->Write(Chunk(50 * 4));
  stream->WritesDone();
  v1::PipelineResponse resp;
  while (stream->Read(&resp)) {
  }
  const grpc::Status s = stream->Finish();
  EXPECT_EQ(s.error_code(), kInvalid);
  EXPECT_NE(s.error_message().find("header.input.element_count 10"), std::string::npos) << s.error_message();
}

// A stage's scan algorithm that the engine lacks is named once: "header.stages[0].scan.algorithm=..."
// (the prefix had ended in ".algorithm" too).
TEST(PipelineBadInput, PipelineScanAlgorithmNamedOnce) {
  testing::TestServer server(MatrixServerOptions());
  auto stub = server.stub();
  const auto offered = server.server().engine().scan_algorithms();
  v1::PipelineStage s = Scan(Id());
  for (int a = v1::ScanAlgorithm_MIN; a <= v1::ScanAlgorithm_MAX; ++a) {
    if (std::find(offered.begin(), offered.end(), static_cast<engine::ScanAlgorithm>(a)) == offered.end()) {
      s.mutable_scan()->set_algorithm(static_cast<v1::ScanAlgorithm>(a));
    }
  }
  grpc::ClientContext ctx;
  auto stream = stub->Pipeline(&ctx);
  stream->Write(Head({s}));
  stream->WritesDone();
  v1::PipelineResponse resp;
  while (stream->Read(&resp)) {
  }
  const grpc::Status s2 = stream->Finish();
  EXPECT_EQ(s2.error_code(), kUnimplemented);
  EXPECT_EQ(s2.error_message().find("algorithm.algorithm"), std::string::npos) << s2.error_message();
  EXPECT_NE(s2.error_message().find("header.stages[0].scan.algorithm="), std::string::npos) << s2.error_message();
}

}  // namespace pipeline_rows

void PipelineRows(std::vector<Row>& rows) {
  pipeline_rows::HeaderRows(rows);
  pipeline_rows::InputRows(rows);
  pipeline_rows::StreamedRows(rows);
  pipeline_rows::ResidentAndRunRows(rows);
}

}  // namespace gpuscan::matrix
