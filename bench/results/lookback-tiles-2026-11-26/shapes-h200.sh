#!/usr/bin/env bash
# ON the GPU machine (carry .gpu-pack: kernel_suite built with the experiment switch
# GPUSCAN_SCAN_POLICY, since removed): the H200's 4-byte look-back tiles from 2^26 elements
# (BulkScanTuning::Wide). 0 = 128x36 (the policy, 9 blocks a SM), a = 128x36 compiled for 10
# blocks a SM, b = 128x40 for 10, c = 128x44 for 9, d = 96x48, e = 160x28. Alternating, ROUNDS rounds.
source scripts/lib/gpu-common.sh && gpu_setup >/dev/null
export LD_LIBRARY_PATH=$R
for r in $(seq 1 ${ROUNDS:-2}); do
  for p in ${POLICIES:-0 a b c d e}; do
    step policy $p round $r
    GPUSCAN_SCAN_POLICY=$p timeout 150 $B/kernel_suite --ops scan --algorithms decoupled_lookback --dtypes int32,float32 \
      --sizes 2^26,2^28,2^30 >"$out/ks_${p}_$r.txt" 2>&1
    grep -E "^scan +decoupled" "$out/ks_${p}_$r.txt" | awk '{printf "%s %s %s %s | ", $3, $4, $7, $8} NR%3==0 {print ""}'
  done
done
