// The CUDA engine's session families, one file each (scan_sessions.cc, segmented_sessions.cc,
// compact_session.cc, histogram_session.cc, scan2d_session.cc, sort.cc): CudaEngine (cuda_engine.cc)
// only picks the family. Each factory instantiates its templates for every dtype and operator.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "engine/cuda/staging.h"
#include "engine/engine.h"

namespace gpuscan::engine::cuda {

std::unique_ptr<ScanSession> NewScan(const std::shared_ptr<Shared>& sh, const ScanSpec& spec);
std::unique_ptr<ReduceSession> NewReduce(const std::shared_ptr<Shared>& sh, const ReduceSpec& spec);
std::unique_ptr<SegmentedScanSession> NewSegmentedScan(const std::shared_ptr<Shared>& sh,
                                                       const SegmentedScanSpec& spec);
// nullptr where the engine serves it by its default (the runs of the segmented scan).
std::unique_ptr<ReduceByKeySession> NewReduceByKey(const std::shared_ptr<Shared>& sh, const SegmentedScanSpec& spec);
std::unique_ptr<CompactSession> NewCompact(const std::shared_ptr<Shared>& sh, const CompactSpec& spec);
std::unique_ptr<HistogramSession> NewHistogram(const std::shared_ptr<Shared>& sh, const HistogramSpec& spec);
std::unique_ptr<Scan2DSession> NewScan2D(const std::shared_ptr<Shared>& sh, const Scan2DSpec& spec);
// Engine::Sort on the device; returns the algorithm's name.
std::string Sort(Shared& sh, const SortSpec& spec, const void* keys, const void* values, uint64_t n, void* keys_out,
                 void* values_out, int64_t* indices_out, StageTimes& times);

}  // namespace gpuscan::engine::cuda
