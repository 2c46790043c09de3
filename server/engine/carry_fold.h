// A scan's carry (ScanSpec::carry, ScanHeader.carry) folded into its results after the scan:
// out[i] = op(carry, scan[i]), and an exclusive scan's out[0] is the carry itself. The fold
// follows the scan, so the bits are those of the array scanned alone and then folded, whatever
// the engine, chunking or algorithm: what gpuscan.dask's host fold computes for a block.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

#include "engine/engine.h"

namespace gpuscan::engine {

// Folds spec.carry into n results at `out` (host memory, raw bytes, any alignment), the first of
// which is element `first` of the array.
void FoldCarry(const ScanSpec& spec, void* out, uint64_t n, uint64_t first);

// Folds the carry into a whole array's n results in the session's device memory (out[0] is the
// array's first element): the engine's own (the CPU engine's "device" memory is host memory).
using DeviceFold = std::function<void(void* out, uint64_t n, StageTimes& times)>;

// `inner` with spec.carry folded into every result it writes; `inner` itself when spec has none.
std::unique_ptr<ScanSession> WithCarry(std::unique_ptr<ScanSession> inner, const ScanSpec& spec, DeviceFold device);

}  // namespace gpuscan::engine
