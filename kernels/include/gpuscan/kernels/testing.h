// Hooks for the kernel tests only; production code never calls these.
#pragma once

#include <cstdint>

namespace gpuscan::kernels::testing_hooks {

// Caps the tiles one single-pass launch (decoupled look-back, chained, compaction) takes, so a
// test can make a modest call span several launches chained through their carries (normally
// only calls past 2^34 int32 elements do). 0 restores the default. Not thread-safe with calls
// in flight on other host threads.
void SetMaxTilesPerLaunch(uint32_t tiles);

}  // namespace gpuscan::kernels::testing_hooks
