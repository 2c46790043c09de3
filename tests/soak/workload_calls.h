// The one call of a Plan (workload_calls.cc), apart from the drawing of plans (workload.cc).
#pragma once

#include <random>

#include "workload.h"

namespace gpuscan::soak {

inline bool IsFloat(v1::DType d) { return d == v1::DTYPE_FLOAT32 || d == v1::DTYPE_FLOAT64; }

// Makes the call `plan` describes and checks its result into `out`; RPC errors are thrown.
// Shared-memory calls take their regions from `pool` (never nullptr for them).
void RunCall(Client& client, const Plan& plan, std::mt19937_64& rng, RegionPool* pool, Outcome& out);

}  // namespace gpuscan::soak
