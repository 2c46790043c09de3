#!/usr/bin/env bash
# ON the GPU machine (carry .gpu-pack: kernel_suite_prof2 = main with prof.diff): what phase 2
# waits for, at 2^28 and 2^30: tid 255's cycles in Carry a tile (and for the supers' first
# tiles), tid 0's cycles to load its aggregate and to pass the barrier, how each carry was had
# (C_b at the first poll, at a later poll, folded from C_{b-1} and T_{b-1}, by the walk back),
# polls a tile, and the supers' last tiles' wait in phase 1 for their super's aggregates.
source scripts/gpu-common.sh >/dev/null
export LD_LIBRARY_PATH=$R
export GPUSCAN_EXP_PROF=1
for d in float32 float64; do
  step $d
  timeout 200 $B/kernel_suite_prof2 --ops scan --algorithms deterministic --dtypes $d --sizes 2^28,2^30 \
    --reps 3 --warmup 1 >"$out/prof_$d.txt" 2>&1
  grep '^prof' "$out/prof_$d.txt" | tail -4
  grep -E "^scan +determ" "$out/prof_$d.txt" | awk '{print $3, $4, $7}'
done
