// gpuscan::Pipeline: stages run one after another on the server in one Pipeline call (see
// PipelineHeader in gpuscan.proto and docs/resident.md, "Pipelines"), on resident arrays
// (RemoteArray), on one streamed input and on the arrays earlier stages made, which stay where the
// server computes between stages. Build it stage by stage, then Run it:
//
//   gpuscan::Pipeline p = client.NewPipeline();
//   gpuscan::Stage kept = p.Compact(x, positive);                         // x: a RemoteArray
//   gpuscan::Stage sums = p.Scan(kept, sum, gpuscan::Return::kKeep);      // kept on the server
//   gpuscan::Stage max = p.Reduce(sums, gpuscan::v1::OPERATOR_MAX);
//   gpuscan::PipelineResult r = p.Run();
//   gpuscan::RemoteArray s = r.Array(sums);
//   float m = r.Value<float>(max);
//
// Each stage method takes the options of the matching Client call (ScanOptions, CompactOptions,
// HistogramBins, SegmentedScanOptions; lanes and shards refused: a pipeline is one call) and
// returns a Stage, the handle later stages read it by and the result answers for. A stage's dtype
// is its input's. Its Return says what comes back besides its final response (counts, a
// reduction's value, a histogram, Timing): nothing (an intermediate, freed on the server after its
// last reader), its arrays' data (PipelineResult::Data), or its arrays kept as new resident
// arrays (PipelineResult::Array, with the ResidentOptions' ttl and label).
//
// Misuse the builder can see (a RemoteArray of another Client or an empty one, a Stage of another
// Pipeline, an array the stage does not make, lanes or shards, host flags in CompactOptions) is
// std::invalid_argument at once. The server checks the whole list before anything runs, and what
// depends on the data (keys of another length than the values a Compact kept) when the stage runs:
// those failures, and every other failed call, are RpcError with the server's status and message
// (naming the field or the stage, as "header.stages[2].keys"). A failed pipeline keeps nothing.
//
// Retries: Run is one call. Without a Return::kKeep stage it only reads, and is retried as
// ClientOptions::retry says (the streamed input is in memory, sent again from its start); with
// one it is one try, as every call that keeps is: a try whose answer was lost may have kept its
// arrays, and a retry would keep them twice.
//
// Narrow dtypes (INT8 ... FLOAT16) are taken as the operations take them: a Scan or
// SegmentedScan stage of one makes its output dtype (options' output_dtype, else numpy's default).
// Not here yet, as on the server: ReduceByKey and Scan2D stages (run them as their own calls on
// RemoteArrays, resident_ops.h).
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "gpuscan/client.h"
#include "gpuscan/remote_array.h"

namespace gpuscan {

// What comes back of a stage besides its final response (v1::StageReturn).
enum class Return {
  kAuto,  // the default, as Python's fetch=None: kData when no later stage reads its arrays, else kNone
  kNone,  // nothing more: its arrays are intermediates, freed after the last stage that reads them
  kData,  // its arrays' elements come back (PipelineResult::Data)
  kKeep,  // its arrays are kept as new resident arrays (PipelineResult::Array)
};

// One stage of a Pipeline, and by default its main array: Scan's and SegmentedScan's result,
// Compact's kept values (its indices with COMPACT_OUTPUT_INDICES), Sort's sorted keys (Argsort's
// permutation). Values(), Indices() and SortValues() name its other arrays (v1::StageArray).
// Reduce and Histogram stages make no array: their handles are for the result only. A copyable
// value, valid with the Pipeline that made it and that Pipeline's results.
class Stage {
 public:
  Stage() = default;                         // names nothing
  uint32_t index() const { return index_; }  // in the pipeline, from 0
  v1::StageArray array() const { return array_; }
  v1::DType dtype() const { return makes_[array_]; }  // of this array; DTYPE_UNSPECIFIED: none
  bool makes(v1::StageArray a) const { return makes_[a] != v1::DTYPE_UNSPECIFIED; }

  Stage Values() const { return With(v1::STAGE_ARRAY_VALUES); }           // Compact's values, Sort's keys
  Stage Indices() const { return With(v1::STAGE_ARRAY_INDICES); }         // Compact's or Sort's int64 indices
  Stage SortValues() const { return With(v1::STAGE_ARRAY_SORT_VALUES); }  // SortPairs' moved values

 private:
  friend class Pipeline;
  friend class PipelineInput;
  friend class PipelineResult;
  Stage With(v1::StageArray a) const {
    Stage s = *this;
    s.array_ = a;
    return s;
  }
  uint64_t pipeline_ = 0;  // Pipeline's serial number (0: none)
  uint32_t index_ = 0;
  v1::StageArray array_ = v1::STAGE_ARRAY_VALUES;
  v1::DType input_dtype_ = v1::DTYPE_UNSPECIFIED;  // its values input's (a Reduce's value)
  std::array<v1::DType, 3> makes_{};               // by v1::StageArray
  std::optional<uint64_t> count_;                  // elements of its arrays, where known before it runs
};

// Where a stage input comes from: a RemoteArray (of the Pipeline's Client, held by the caller until
// Run returns), an earlier Stage's array, or the Pipeline's streamed input (Pipeline::Input).
// Converts implicitly from the first two.
class PipelineInput {
 public:
  PipelineInput(const RemoteArray& array);  // NOLINT: implicit
  PipelineInput(const Stage& stage);        // NOLINT: implicit

  v1::DType dtype() const { return dtype_; }

 private:
  friend class Pipeline;
  PipelineInput() = default;
  enum class Kind { kResident, kStage, kStreamed };
  Kind kind_ = Kind::kStreamed;
  const Client* client_ = nullptr;  // kResident
  std::string id_;                  // kResident
  Stage stage_;                     // kStage
  uint64_t pipeline_ = 0;           // kStage, kStreamed
  v1::DType dtype_ = v1::DTYPE_UNSPECIFIED;
  std::optional<uint64_t> count_;
};

class PipelineResult;

class Pipeline {
 public:
  explicit Pipeline(Client& client);  // also Client::NewPipeline()
  Pipeline(Pipeline&&) = default;
  Pipeline& operator=(Pipeline&&) = default;
  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;

  // The streamed input (one per pipeline): n elements of T, or `bytes` of raw little-endian
  // elements of `dtype`, sent after the header and held on the server while the call runs, so a
  // chain on data not yet resident crosses the wire once. The memory is read when Run sends it
  // (in place, not copied): it must stay as it is until Run returns.
  template <class T>
  PipelineInput Input(const T* data, size_t n) {
    return Input(DTypeOf<T>(), data, n * sizeof(T));
  }
  template <class T>
  PipelineInput Input(const std::vector<T>& x) {
    return Input(x.data(), x.size());
  }
  PipelineInput Input(v1::DType dtype, const void* data, size_t bytes);

  // The stages, as the Client's calls of the same names (client.h, resident_ops.h). `keep`: the
  // kept arrays' ttl and label, with Return::kKeep only.
  Stage Scan(const PipelineInput& in, const ScanOptions& options = {}, Return returns = Return::kAuto,
             const ResidentOptions& keep = {});
  Stage Reduce(const PipelineInput& in, v1::Operator op);  // PipelineResult::Value
  // By options.predicate (options.flags must be empty), or by a flags input (UINT8/INT8, nonzero
  // keeps; a RemoteArray or the streamed input). options.output: values, indices or both.
  Stage Compact(const PipelineInput& in, const CompactOptions& options, Return returns = Return::kAuto,
                const ResidentOptions& keep = {});
  Stage Compact(const PipelineInput& in, const PipelineInput& flags, const CompactOptions& options,
                Return returns = Return::kAuto, const ResidentOptions& keep = {});
  Stage Histogram(const PipelineInput& in, const HistogramBins& bins);  // PipelineResult::Histogram
  // keys: an integer array (its dtype is the key_dtype); heads: UINT8/INT8, nonzero begins a segment.
  Stage SegmentedScan(const PipelineInput& in, const PipelineInput& keys, const SegmentedScanOptions& options = {},
                      Return returns = Return::kAuto, const ResidentOptions& keep = {});
  Stage SegmentedScanHeads(const PipelineInput& in, const PipelineInput& heads,
                           const SegmentedScanOptions& options = {}, Return returns = Return::kAuto,
                           const ResidentOptions& keep = {});
  // Stable sorts: the sorted keys; the permutation (Argsort, int64); the keys with values moved
  // along (SortPairs: the Stage is the keys, .SortValues() the values); any SortOutput (values:
  // required for, and only with, SORT_OUTPUT_KEYS_AND_VALUES).
  Stage Sort(const PipelineInput& keys, bool descending = false, Return returns = Return::kAuto,
             const ResidentOptions& keep = {});
  Stage Argsort(const PipelineInput& keys, bool descending = false, Return returns = Return::kAuto,
                const ResidentOptions& keep = {});
  Stage SortPairs(const PipelineInput& keys, const PipelineInput& values, bool descending = false,
                  Return returns = Return::kAuto, const ResidentOptions& keep = {});
  Stage Sort(const PipelineInput& keys, const PipelineInput* values, v1::SortOutput output, bool descending,
             Return returns = Return::kAuto, const ResidentOptions& keep = {});

  // Sends the pipeline (Client::PipelineStream) and reads its results. May be run again: each Run
  // is a new call (kept arrays kept again). Throws RpcError as described above.
  PipelineResult Run(Progress progress = {});

  size_t size() const { return static_cast<size_t>(header_.stages_size()); }  // stages so far
  const v1::PipelineHeader& header() const { return header_; }                // what Run sends
  Client& client() const { return *client_; }

 private:
  v1::PipelineStage* Add(const PipelineInput& in, Return returns, const ResidentOptions& keep, const char* op);
  v1::StageInput Named(const PipelineInput& in, const char* op, const char* what) const;
  Stage Made(const PipelineInput& in, std::array<v1::DType, 3> makes, std::optional<uint64_t> count);

  Client* client_;
  uint64_t serial_;
  v1::PipelineHeader header_;
  std::vector<Stage> stages_;    // each stage's handle (its arrays' dtypes)
  std::vector<Return> returns_;  // by stage
  const void* input_ = nullptr;  // the streamed input, when there is one
  size_t input_bytes_ = 0;
  bool has_input_ = false;
};

// A Pipeline's results, by the Stages that made them. Owns the kept arrays until Array() hands them
// out: those not taken are dropped with it (as KeptArrays' are). Move-only.
class PipelineResult {
 public:
  PipelineResult() = default;
  PipelineResult(PipelineResult&&) = default;
  PipelineResult& operator=(PipelineResult&&) = default;

  size_t size() const { return stages_.size(); }  // stages

  // A Return::kKeep stage's array (s.array()), now owned by the caller; std::logic_error if it was
  // taken already.
  RemoteArray Array(const Stage& s);
  // A Return::kData stage's array, as elements of T (its dtype, else std::invalid_argument), or
  // as raw little-endian bytes.
  template <class T>
  std::vector<T> Data(const Stage& s) const {
    if (s.dtype() != DTypeOf<T>()) WrongType(s, DTypeOf<T>());
    const std::string& raw = RawData(s);
    std::vector<T> out(raw.size() / sizeof(T));
    if (!out.empty()) std::memcpy(out.data(), raw.data(), out.size() * sizeof(T));
    return out;
  }
  const std::string& RawData(const Stage& s) const;
  // A Reduce stage's value (T: its input's dtype, else std::invalid_argument).
  template <class T>
  T Value(const Stage& s) const {
    T v{};
    RawValue(s, DTypeOf<T>(), &v, sizeof(T));
    return v;
  }
  HistogramResult Histogram(const Stage& s) const;  // a Histogram stage's
  // Elements of the stage's arrays: a Compact's kept_count, a Scan's, SegmentedScan's or Sort's
  // element_count; a Reduce's or Histogram's input's.
  uint64_t Count(const Stage& s) const;
  gpuscan::Timing Timing(const Stage& s) const;              // the stage's own
  const gpuscan::Timing& timing() const { return timing_; }  // the whole pipeline's
  // The stage's final response as the server sent it (kept arrays' ArrayInfo, counts, Timing).
  const v1::PipelineResponse& Final(const Stage& s) const;

 private:
  friend class Pipeline;
  struct StageResult {
    v1::PipelineResponse final;
    std::array<std::string, 3> data;  // returned elements, by v1::StageArray
    std::array<RemoteArray, 3> kept;  // kept arrays, by v1::StageArray
    std::array<bool, 3> taken{};
    Return returns = Return::kAuto;
  };
  const StageResult& Of(const Stage& s) const;
  [[noreturn]] static void WrongType(const Stage& s, v1::DType want);
  void RawValue(const Stage& s, v1::DType want, void* out, size_t size) const;

  uint64_t pipeline_ = 0;
  std::vector<StageResult> stages_;
  gpuscan::Timing timing_;
};

}  // namespace gpuscan
