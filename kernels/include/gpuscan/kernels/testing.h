// Hooks for the kernel tests only; production code never calls these.
#pragma once

#include <cstdint>

namespace gpuscan::kernels::testing_hooks {

// Caps the tiles one single-pass launch (decoupled look-back, chained, compaction) takes, so a
// test can make a modest call span several launches chained through their carries (normally
// only calls past 2^34 int32 elements do). 0 restores the default. Not thread-safe with calls
// in flight on other host threads.
void SetMaxTilesPerLaunch(uint32_t tiles);

// Caps the blocks of a persistent launch (the deterministic scan's one pass), so a test's few
// hundred tiles run many to a block, as a large call's do. 0 restores the default (as many as fit
// the device at once). Not thread-safe with calls in flight on other host threads.
void SetMaxPersistentBlocks(uint32_t blocks);

// Makes the deterministic scan fold every carry by walking back from the nearest published one
// (the path a tile takes when the previous super's carry is not out yet, which otherwise depends
// on timing), so a test covers it. false restores the default. Not thread-safe with calls in
// flight on other host threads.
void SetCanonicalCarryWalk(bool on);

}  // namespace gpuscan::kernels::testing_hooks
