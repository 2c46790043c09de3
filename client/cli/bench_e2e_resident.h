// gpuscan bench --e2e --resident: calls on an array put on the server once before the levels
// (header.resident names it), so only the header goes out and the result comes back: what a
// caller whose data stays on the server pays a call. The ceiling is one unary call (Health) on
// the same channel: the floor of any call, which a resident call's latency compares with.
#pragma once

#include "bench.h"
#include "gpuscan/client.h"
#include "gpuscan/remote_array.h"

namespace gpuscan::cli {

// One call on `in`: a scan's result to `out` (as the streamed call's), a reduction's value, a
// compaction's kept values (discarded).
Timing ResidentCall(Client& client, const E2EArgs& a, const RemoteArray& in, const Sink& out,
                    const v1::Predicate& predicate);

}  // namespace gpuscan::cli
