// The CPU engine's session families, one file each (scan_sessions.cc, reduce_sessions.cc,
// compact_session.cc, histogram_session.cc, scan2d_sessions.cc, sort.cc; the canonical tree's
// pieces in tree_sessions.h): CpuEngine (cpu_engine.cc) only checks the spec and picks the
// family. Each factory instantiates its templates for every dtype and operator.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "engine/engine.h"

namespace gpuscan::engine::cpu {

struct Pool;  // blocks.h

// A resident array (host memory here) is computed in pieces of this many bytes, a client's default
// chunk: the same chunking as a streamed call's, and pieces that stay in the cache between the
// blocked algorithms' passes.
inline constexpr uint64_t kResidentPieceBytes = uint64_t{4} << 20;

std::unique_ptr<ScanSession> NewScan(const std::shared_ptr<Pool>& pool, const ScanSpec& spec);
std::unique_ptr<ReduceSession> NewReduce(const std::shared_ptr<Pool>& pool, const ReduceSpec& spec);
std::unique_ptr<SegmentedScanSession> NewSegmentedScan(const std::shared_ptr<Pool>& pool,
                                                       const SegmentedScanSpec& spec);
std::unique_ptr<CompactSession> NewCompact(const std::shared_ptr<Pool>& pool, const CompactSpec& spec);
std::unique_ptr<HistogramSession> NewHistogram(const std::shared_ptr<Pool>& pool, const HistogramSpec& spec);
std::unique_ptr<Scan2DSession> NewScan2D(const std::shared_ptr<Pool>& pool, const Scan2DSpec& spec);
// Engine::Sort on the pool; returns the algorithm's name.
std::string Sort(Pool& pool, const SortSpec& spec, const void* keys, const void* values, uint64_t n, void* keys_out,
                 void* values_out, int64_t* indices_out, StageTimes& times);

}  // namespace gpuscan::engine::cpu
