#!/usr/bin/env bash
# ON the GPU machine (carry .gpu-pack: kernel_suite built with the experiment switch
# GPUSCAN_SEG_POLICY, since removed): the bulk segmented scan's tile shapes and sleeps, int32
# values under uint32 keys; a = 128x32 (the policy), g = 128x24, h = 128x20, i = 96x24, j = 192x16;
# alternating, three rounds.
source scripts/lib/gpu-common.sh && gpu_setup >/dev/null
export LD_LIBRARY_PATH=$R
for r in 1 2 3; do
  for p in a g h i j; do
    step policy $p round $r
    GPUSCAN_SEG_POLICY=$p timeout 100 $B/kernel_suite --ops segmented_scan --dtypes int32 --sizes 2^20,2^24,2^26,2^28,2^30 >"$out/ks_${p}_$r.txt" 2>&1
    grep -E "^segmented_scan fused" "$out/ks_${p}_$r.txt" | awk '{printf "%s %s %s %s | ", $4, $5, $7, $8} END {print ""}'
  done
done
