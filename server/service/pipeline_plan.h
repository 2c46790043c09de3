// A Pipeline's plan: its header checked whole before anything runs (see PipelineHeader in the
// proto), each stage's operation turned into its engine spec, each input into where it comes
// from, and, for each array a stage makes, the last stage that reads it (when it may be freed).
// Resident ids are only named here; the handler finds them (pipeline_handler.cc), since that needs
// the store and the caller's tenant. The request fuzzer runs PlanPipeline too.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <grpcpp/support/status.h>

#include "engine/engine.h"
#include "gpuscan/v1/gpuscan.pb.h"
#include "service/narrow.h"

namespace gpuscan::server {

inline constexpr uint32_t kMaxPipelineStages = 64;  // Limits.max_pipeline_stages
inline constexpr int kStageArrays = 3;              // v1::StageArray's values

enum class StageOp { kScan, kReduce, kCompact, kHistogram, kSort, kSegmentedScan };
const char* StageOpName(StageOp op);  // the oneof field's name: "scan", "segmented_scan", ...

// Where one stage input comes from.
struct StageSource {
  enum class Kind { kNone, kResident, kStreamed, kStage };
  Kind kind = Kind::kNone;
  std::string id;      // kResident
  uint32_t stage = 0;  // kStage: the stage, and which of its arrays
  int array = 0;
  int dtype = 0;       // the v1::DType the stage needs it to have (flags: 0, any one-byte dtype)
  std::string field;   // "header.stages[2].values", for messages
};

struct StagePlan {
  StageOp op = StageOp::kScan;
  std::string field;  // "header.stages[2].scan"
  engine::ScanSpec scan;
  engine::ReduceSpec reduce;
  engine::CompactSpec compact;
  engine::HistogramSpec histogram;
  engine::SortSpec sort;
  engine::SegmentedScanSpec segmented;
  StageSource values, flags, keys, sort_values;  // kind kNone: not an input of this stage
  // A narrow values input (Sort: keys) and Sort's narrow sort_values, as the operation's ToEngine
  // takes them: the stage runs on them widened (pipeline_narrow.cc).
  std::optional<NarrowInput> narrow, narrow_sort_values;
  std::optional<uint64_t> declared;  // header.element_count
  v1::StageReturn returns = v1::STAGE_RETURN_NONE;
  uint64_t ttl_ms = 0;
  std::string label;
  // The dtype of each array the stage makes, by v1::StageArray (0: it makes none there), and the
  // last stage that reads it (-1: none).
  std::array<int, kStageArrays> makes{};
  std::array<int, kStageArrays> last_reader{-1, -1, -1};

  std::array<const StageSource*, 4> inputs() const { return {&values, &flags, &keys, &sort_values}; }
};

struct PipelinePlan {
  std::vector<StagePlan> stages;
  bool streamed = false;  // header.input is set and read
};

// Checks the header whole (INVALID_ARGUMENT naming the field; UNIMPLEMENTED for a scan algorithm
// `engine` does not offer) and fills *plan.
grpc::Status PlanPipeline(const v1::PipelineHeader& header, const engine::Engine& engine, PipelinePlan* plan);

// `status` with its message naming `prefix` instead of "header" (ToEngine's messages name
// "header.dtype": a stage's is "header.stages[2].scan.dtype"), or prefixed with it.
grpc::Status Renamed(const grpc::Status& status, const std::string& prefix);

// A refusal of header.input's checks (PutChecks names PutArray's header.X): every header.X named
// header.input.X, or "header.input: " before a message that names no header field.
grpc::Status InputRenamed(const grpc::Status& status);

}  // namespace gpuscan::server
