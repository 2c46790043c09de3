#!/usr/bin/env bash
# ON the GPU machine (carry .gpu-pack: kernel_suite_twprof = totalwarp-prof.diff, totalwarp.diff with counters):
# blocks a SM, tid 255's cycles in Carry a tile, the total warp's cycles a job (pickup to
# publish), and the tile thread's wait for a free job slot; float32 at 2^28 and 2^30.
source scripts/gpu-common.sh >/dev/null
export LD_LIBRARY_PATH=$R
export GPUSCAN_EXP_PROF=1
timeout 200 $B/kernel_suite_twprof --ops scan --algorithms deterministic --dtypes float32 --sizes 2^28,2^30 \
  --reps 3 --warmup 1 >"$out/prof_float32.txt" 2>&1
grep '^prof' "$out/prof_float32.txt" | tail -4
grep -E "^scan +determ" "$out/prof_float32.txt" | awk '{print $3, $4, $7}'
