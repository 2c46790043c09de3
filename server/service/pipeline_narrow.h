// A pipeline stage with narrow inputs (StagePlan::narrow, narrow_sort_values): run as the
// operation's own resident call runs them (resident_narrow.h), so its results are that call's.
#pragma once

#include <grpcpp/support/status.h>

#include "service/pipeline_plan.h"
#include "service/pipeline_stages.h"

namespace gpuscan::server {

// The narrow inputs widened into counted memory of the engine's dtype (freed when the stage
// ends), the stage run on them (RunStage), and what leaves narrow narrowed back: Compact's kept
// values and Sort's keys and values to their dtype, a FLOAT16 output's scan to FLOAT16 (rounded
// once), a Reduce's FLOAT16 value. RunStage's statuses; RESOURCE_EXHAUSTED naming the stage when
// the widened or narrowed arrays do not fit.
grpc::Status RunNarrowStage(const StageEnv& env, const StagePlan& plan, const StageArrayRef& values,
                            const StageArrayRef& flags, const StageArrayRef& keys, const StageArrayRef& sort_values,
                            StageOutcome* outcome);

}  // namespace gpuscan::server
