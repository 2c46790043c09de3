#!/usr/bin/env bash
# ON the GPU machine (carry .gpu-pack: kernel_suite_prof = main with ceiling.diff and the clock64
# marks of prof.diff): where a block's iteration goes, thread 0's cycles a tile by segment (the
# marks sit after block-wide barriers, so thread 0's clock is the block's), at 2^28 and 2^30,
# for the kernel (ceil 0) and the ceilings 1 (a copy through the pipeline), 3 (phase 1 only) and
# 4 (no fetch). GPUSCAN_EXP_PROF adds the marks and a synchronisation after each launch.
source scripts/gpu-common.sh >/dev/null
export LD_LIBRARY_PATH=$R
export GPUSCAN_EXP_PROF=1
for c in 0 1 3 4; do
  export GPUSCAN_EXP_CEIL=$c
  for d in float32 float64; do
    step ceil $c $d
    timeout 200 $B/kernel_suite_prof --ops scan --algorithms deterministic --dtypes $d --sizes 2^28 \
      --reps 5 --warmup 1 >"$out/prof_${c}_$d.txt" 2>&1
    grep '^prof' "$out/prof_${c}_$d.txt" | tail -3
    grep -E "^scan +determ" "$out/prof_${c}_$d.txt" | awk '{print $3, $4, $7}'
  done
done
