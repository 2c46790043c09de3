// Pipeline's seeds (request_fuzz_replay --write-seeds writes them last: the earlier seeds' bytes
// stay as they were). Kind 20 (the call): request #0 carries the PipelineHeader and, with
// header.input, the first chunk; each request's second stream is the content of the array the
// next one-byte stage id names (its byte: the dtype - 1). Kind 21 (the plan alone): the records'
// header bytes concatenated are one PipelineHeader.
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "seed_builders.h"

namespace gpuscan::fuzz::seeds {
namespace {

// A one-byte id: an array of `dtype` the fuzzer puts (AnyDType(b) = 1 + b % 11).
v1::StageInput Short(v1::DType dtype) {
  v1::StageInput in;
  in.set_id(std::string(1, static_cast<char>(dtype - 1)));
  return in;
}
v1::StageInput Of(uint32_t stage, v1::StageArray array = v1::STAGE_ARRAY_VALUES) {
  v1::StageInput in;
  in.set_stage(stage);
  in.set_array(array);
  return in;
}
v1::StageInput Streamed() {
  v1::StageInput in;
  in.set_streamed(true);
  return in;
}

v1::PipelineStage ScanS(v1::StageInput values, v1::DType d, v1::Operator op, bool exclusive = false,
                        v1::StageReturn returns = v1::STAGE_RETURN_NONE) {
  v1::PipelineStage s;
  *s.mutable_scan() = ScanH(d, op, exclusive);
  *s.mutable_values() = std::move(values);
  s.set_returns(returns);
  return s;
}
v1::PipelineStage ReduceS(v1::StageInput values, v1::DType d, v1::Operator op) {
  v1::PipelineStage s;
  *s.mutable_reduce() = ReduceH(d, op);
  *s.mutable_values() = std::move(values);
  return s;
}
// Compact by x > 0 (int dtypes), or by flags when given.
v1::PipelineStage CompactS(v1::StageInput values, v1::DType d, v1::CompactOutput out,
                           std::optional<v1::StageInput> flags = std::nullopt,
                           v1::StageReturn returns = v1::STAGE_RETURN_NONE) {
  v1::PipelineStage s;
  if (flags) {
    *s.mutable_compact() = FlagsH(d, out);
    *s.mutable_flags() = *flags;
  } else {
    v1::CompactHeader& h = *s.mutable_compact();
    h.set_dtype(d);
    h.set_output(out);
    h.mutable_predicate()->set_op(v1::PREDICATE_OP_GT);
    h.mutable_predicate()->mutable_threshold()->set_int_value(0);
  }
  *s.mutable_values() = std::move(values);
  s.set_returns(returns);
  return s;
}
v1::PipelineStage HistogramS(v1::StageInput values, const v1::HistogramHeader& h) {
  v1::PipelineStage s;
  *s.mutable_histogram() = h;
  *s.mutable_values() = std::move(values);
  return s;
}
v1::PipelineStage SortS(v1::StageInput keys, const v1::SortHeader& h, std::optional<v1::StageInput> values = std::nullopt,
                        v1::StageReturn returns = v1::STAGE_RETURN_NONE) {
  v1::PipelineStage s;
  *s.mutable_sort() = h;
  *s.mutable_values() = std::move(keys);
  if (values) *s.mutable_sort_values() = *values;
  s.set_returns(returns);
  return s;
}
v1::PipelineStage SegmentedS(v1::StageInput values, const v1::SegmentedScanHeader& h, v1::StageInput segments,
                             v1::StageReturn returns = v1::STAGE_RETURN_NONE) {
  v1::PipelineStage s;
  *s.mutable_segmented_scan() = h;
  *s.mutable_values() = std::move(values);
  if (h.heads()) {
    *s.mutable_flags() = std::move(segments);
  } else {
    *s.mutable_keys() = std::move(segments);
  }
  s.set_returns(returns);
  return s;
}

v1::PipelineHeader PipeH(std::vector<v1::PipelineStage> stages, std::optional<v1::DType> input = std::nullopt,
                         std::optional<uint64_t> count = std::nullopt) {
  v1::PipelineHeader h;
  for (v1::PipelineStage& s : stages) *h.add_stages() = std::move(s);
  if (input) h.mutable_input()->set_dtype(*input);
  if (count) h.mutable_input()->set_element_count(*count);
  return h;
}

}  // namespace

void WritePipelineSeeds(const std::function<void(const std::string&, int, uint8_t, const std::vector<SeedRequest>&)>& put) {
  // ---- accepted: every stage kind, resident and streamed inputs, declared and not, returns and keeps
  put("accept_pipeline_compact_scan_reduce_int32", kPipeline, kChunk256,
      {Head(PipeH({CompactS(Short(v1::DTYPE_INT32), v1::DTYPE_INT32, v1::COMPACT_OUTPUT_VALUES),
                   ScanS(Of(0), v1::DTYPE_INT32, v1::OPERATOR_SUM, true, v1::STAGE_RETURN_DATA),
                   ReduceS(Of(1), v1::DTYPE_INT32, v1::OPERATOR_MAX)}),
            "", NonZero(400, 4))});
  {
    const std::string x = NonZero(150 * 4, 4);
    put("accept_pipeline_streamed_scan_histogram_declared", kPipeline, kChunk256,
        {Head(PipeH({ScanS(Streamed(), v1::DTYPE_INT32, v1::OPERATOR_BIT_XOR),
                     HistogramS(Of(0), EvenH(v1::DTYPE_INT32, 12, -2e9, 2e9))},
                    v1::DTYPE_INT32, 150),
              x.substr(0, 256)),
         Chunk(x.substr(256, 256)), Chunk(x.substr(512))});
  }
  {
    // float64 SUM: the deterministic scan, held to the canonical tree; the input's count not declared.
    const std::string x = Reals<double>(70);
    put("accept_pipeline_streamed_float64_sum_undeclared", kPipeline, kChunk256,
        {Head(PipeH({ScanS(Streamed(), v1::DTYPE_FLOAT64, v1::OPERATOR_SUM, false, v1::STAGE_RETURN_DATA),
                     ReduceS(Of(0), v1::DTYPE_FLOAT64, v1::OPERATOR_SUM), ReduceS(Streamed(), v1::DTYPE_FLOAT64, v1::OPERATOR_MIN)},
                    v1::DTYPE_FLOAT64)),
         Chunk(x.substr(0, 256)), Chunk(""), Chunk(x.substr(256, 256)), Chunk(x.substr(512))});
  }
  {
    // sort (keys and values) -> segmented scan of the moved values by the sorted keys, kept.
    v1::PipelineStage seg = SegmentedS(Of(0, v1::STAGE_ARRAY_SORT_VALUES),
                                       SegKeysH(v1::DTYPE_FLOAT32, v1::OPERATOR_SUM, v1::DTYPE_INT32),
                                       Of(0, v1::STAGE_ARRAY_VALUES), v1::STAGE_RETURN_KEEP);
    seg.set_label("seed");
    seg.set_ttl_ms(5000);
    put("accept_pipeline_sort_then_segmented_scan_keep", kPipeline, kChunk256,
        {Head(PipeH({SortS(Short(v1::DTYPE_INT32), SortH(v1::DTYPE_INT32, v1::SORT_OUTPUT_KEYS_AND_VALUES, false, v1::DTYPE_FLOAT32),
                           Short(v1::DTYPE_FLOAT32)),
                     seg}),
              "", Keys<int32_t>(90)),
         Chunk("", Reals<float>(90))});
  }
  put("accept_pipeline_compact_flags_streamed_keep_then_argsort", kPipeline, kChunk256,
      {Head(PipeH({CompactS(Short(v1::DTYPE_INT64), v1::DTYPE_INT64, v1::COMPACT_OUTPUT_VALUES_AND_INDICES, Streamed(),
                            v1::STAGE_RETURN_KEEP),
                   SortS(Of(0), SortH(v1::DTYPE_INT64, v1::SORT_OUTPUT_KEYS_AND_INDICES, true), std::nullopt,
                         v1::STAGE_RETURN_DATA)},
                  v1::DTYPE_UINT8, 60),
            Flags(60), Keys<int64_t>(60))});
  put("accept_pipeline_segmented_heads_streamed", kPipeline, kChunk256,
      {Head(PipeH({SegmentedS(Short(v1::DTYPE_UINT32), SegHeadsH(v1::DTYPE_UINT32, v1::OPERATOR_MAX, true), Streamed(),
                              v1::STAGE_RETURN_DATA)},
                  v1::DTYPE_INT8),
            Heads(80), NonZero(320, 4))});
  put("accept_pipeline_reduce_and_histogram_of_one_array", kPipeline, kChunk256 | kBudget64K,
      {Head(PipeH({ReduceS(Short(v1::DTYPE_UINT64), v1::DTYPE_UINT64, v1::OPERATOR_BIT_XOR),
                   HistogramS(Short(v1::DTYPE_UINT64), EdgesH(v1::DTYPE_UINT64, {0, 1e6, 1e12, 1e18, 2e19}))}),
            "", NonZero(512, 8)),
       Chunk("", NonZero(256, 8))});
  // ---- refused: by the plan, by the handler, and by a stage when it runs
  put("reject_pipeline_forward_reference", kPipeline, kChunk256,
      {Head(PipeH({ScanS(Of(1), v1::DTYPE_INT32, v1::OPERATOR_SUM), ScanS(Short(v1::DTYPE_INT32), v1::DTYPE_INT32, v1::OPERATOR_SUM)}),
            "", NonZero(64, 4))});
  put("reject_pipeline_reduce_keep", kPipeline, kChunk256,
      {Head(PipeH({[] {
                    v1::PipelineStage s = ReduceS(Short(v1::DTYPE_INT32), v1::DTYPE_INT32, v1::OPERATOR_SUM);
                    s.set_returns(v1::STAGE_RETURN_KEEP);
                    return s;
                  }()}),
            "", NonZero(64, 4))});
  put("reject_pipeline_resident_dtype_differs", kPipeline, kChunk256,
      {Head(PipeH({ScanS(Short(v1::DTYPE_INT64), v1::DTYPE_INT32, v1::OPERATOR_SUM)}), "", NonZero(64, 8))});
  put("reject_pipeline_keys_length_differs_from_kept", kPipeline, kChunk256,
      {Head(PipeH({CompactS(Short(v1::DTYPE_INT32), v1::DTYPE_INT32, v1::COMPACT_OUTPUT_VALUES),
                   SegmentedS(Of(0), SegKeysH(v1::DTYPE_INT32, v1::OPERATOR_SUM, v1::DTYPE_INT32), Short(v1::DTYPE_INT32))}),
            "", NonZero(200, 4)),
       Chunk("", RunKeys(50, 4, 5))});
  put("reject_pipeline_input_count_larger", kPipeline, kChunk256,
      {Head(PipeH({ScanS(Streamed(), v1::DTYPE_INT64, v1::OPERATOR_MIN)}, v1::DTYPE_INT64, 40), NonZero(256, 8))});
  put("reject_pipeline_data_without_input", kPipeline, kChunk256,
      {Head(PipeH({ScanS(Short(v1::DTYPE_INT32), v1::DTYPE_INT32, v1::OPERATOR_SUM)}), NonZero(16, 4), NonZero(64, 4))});
  put("reject_pipeline_input_past_budget", kPipeline, kChunk1K | kBudget512,
      {Head(PipeH({ReduceS(Streamed(), v1::DTYPE_INT32, v1::OPERATOR_SUM)},
                  v1::DTYPE_INT32)),
       Chunk(NonZero(1024, 4))});
  put("reject_pipeline_not_served", kPipeline, kChunk256 | kNotServed,
      {Head(PipeH({ScanS(Streamed(), v1::DTYPE_INT32, v1::OPERATOR_SUM)}, v1::DTYPE_INT32), NonZero(16, 4))});
  // ---- the plan alone: the stages of several records add up
  {
    std::vector<SeedRequest> reqs;
    v1::PipelineHeader first = PipeH({ScanS(Short(v1::DTYPE_FLOAT32), v1::DTYPE_FLOAT32, v1::OPERATOR_MAX)});
    reqs.push_back(Head(first));
    for (uint32_t i = 1; i < 20; ++i) {
      v1::PipelineHeader more;
      *more.add_stages() = i % 3 == 0 ? SortS(Of(i - 1), SortH(v1::DTYPE_FLOAT32, v1::SORT_OUTPUT_KEYS_AND_INDICES))
                           : i % 3 == 1 ? CompactS(Of(i - 1), v1::DTYPE_FLOAT32, v1::COMPACT_OUTPUT_VALUES_AND_INDICES,
                                                   Short(v1::DTYPE_UINT8))
                                        : ScanS(Of(i - 1), v1::DTYPE_FLOAT32, v1::OPERATOR_SUM, true);
      reqs.push_back(Head(more));
    }
    put("accept_pipeline_plan_chain_of_20", kPipelinePlan, kChunk256, reqs);
    for (uint32_t i = 20; i < 65; i += 5) {  // (an input has at most 64 records: five stages a record)
      v1::PipelineHeader more;
      for (uint32_t j = i; j < i + 5; ++j) *more.add_stages() = ScanS(Of(j - 1), v1::DTYPE_FLOAT32, v1::OPERATOR_SUM);
      reqs.push_back(Head(more));
    }
    put("reject_pipeline_plan_65_stages", kPipelinePlan, kChunk256, reqs);
  }
  put("reject_pipeline_plan_self_reference", kPipelinePlan, kChunk256,
      {Head(PipeH({ScanS(Short(v1::DTYPE_INT32), v1::DTYPE_INT32, v1::OPERATOR_SUM)})),
       Head(PipeH({ScanS(Of(1), v1::DTYPE_INT32, v1::OPERATOR_SUM)}))});
}

}  // namespace gpuscan::fuzz::seeds
