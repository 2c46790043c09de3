#!/usr/bin/env bash
# ON the GPU machine (carry .gpu-pack: kernel_suite built with the experiment switch
# GPUSCAN_SEG_POLICY, since removed): the bulk segmented scan's tile shapes and sleeps, int32
# values under uint32 keys; a = 128x32 (the policy), e = 128x28, f = 96x32, g = 128x24 (7, 9 and 9 blocks a SM);
# alternating, three rounds.
source scripts/lib/gpu-common.sh && gpu_setup >/dev/null
export LD_LIBRARY_PATH=$R
for r in 1 2 3; do
  for p in a e f g; do
    step policy $p round $r
    GPUSCAN_SEG_POLICY=$p timeout 100 $B/kernel_suite --ops segmented_scan --dtypes int32 --sizes 2^20,2^24,2^26,2^28,2^30 >"$out/ks_${p}_$r.txt" 2>&1
    grep -E "^segmented_scan fused" "$out/ks_${p}_$r.txt" | awk '{printf "%s %s %s %s | ", $4, $5, $7, $8} END {print ""}'
  done
done
