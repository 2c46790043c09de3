// Running one pipeline stage (pipeline_plan.h) on arrays where the engine computes: each
// operation on its device path, as its RPC runs a resident call (scan_handler.cc and the others),
// so the bits are that call's. The arrays a stage makes are counted against the resident budget
// (ResidentStore::Allocate) and lie beside its values input.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <grpcpp/support/status.h>

#include "engine/engine.h"
#include "gpuscan/v1/gpuscan.pb.h"
#include "service/pipeline_plan.h"
#include "service/resident_store.h"

namespace gpuscan::server {

// One array a stage reads or makes: its memory, dtype and element count (a Compact stage's kept
// values may lie in memory larger than count elements).
struct StageArrayRef {
  std::shared_ptr<engine::ResidentMemory> memory;
  int dtype = 0;
  uint64_t count = 0;
  std::shared_ptr<const ResidentArray> held;  // a resident input: held while the call runs
  explicit operator bool() const { return memory != nullptr; }
};

struct StageEnv {
  ResidentStore& store;
  std::string tenant;
  uint64_t chunk_bytes;  // the host pieces of a path that computes from host memory
};

// What a stage did: the arrays it made (by v1::StageArray), and its final response (its
// operation's: counts, values, Timing; kept arrays' info is added when they are kept).
struct StageOutcome {
  std::array<StageArrayRef, kStageArrays> made;
  v1::PipelineResponse final;
  engine::StageTimes times;
};

// Runs the stage on `values` (and flags, keys, sort_values, those the plan names): INVALID_ARGUMENT
// naming the stage for inputs of different lengths or a header.element_count the values do not
// have, RESOURCE_EXHAUSTED naming it when what it makes does not fit. Engine errors other than
// those the caller's input causes are thrown (the call's EngineFailure re-checks the engine).
grpc::Status RunStage(const StageEnv& env, const StagePlan& plan, const StageArrayRef& values,
                      const StageArrayRef& flags, const StageArrayRef& keys, const StageArrayRef& sort_values,
                      StageOutcome* outcome);

// A made array about to be kept: when its memory is larger than its count (a Compact stage's),
// copied into memory of its size (ResidentStore::Allocate, counted from now), which replaces it.
// RESOURCE_EXHAUSTED naming the stage when that does not fit.
grpc::Status CutToCount(const StageEnv& env, const StagePlan& plan, StageArrayRef* array);

}  // namespace gpuscan::server
