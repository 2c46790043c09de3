#!/usr/bin/env bash
# ON the GPU machine (carry .gpu-pack: kernel_suite built with the experiment switch
# GPUSCAN_SCAN_POLICY, since removed): the bulk look-back scan's tile shape from 2^26 elements
# (BulkScanTuning::Large), second sweep. 4-byte: 0 = 256x32 (the policy), c = 128x32 (Small), e = 128x40,
# f = 128x32 compiled for 12 blocks a SM, g = 128x36, h = 64x64. 8-byte: 0 = 128x32, c = 128x24, e = 128x20,
# f = 128x24 for 9 blocks a SM, g = 160x16, h = 128x28. Alternating, ROUNDS rounds.
source scripts/lib/gpu-common.sh && gpu_setup >/dev/null
export LD_LIBRARY_PATH=$R
for r in $(seq 1 ${ROUNDS:-2}); do
  for p in 0 c e f g h; do
    step policy $p round $r
    GPUSCAN_SCAN_POLICY=$p timeout 150 $B/kernel_suite --ops scan --algorithms decoupled_lookback --dtypes int32,float32,int64,float64 \
      --sizes 2^26,2^28,2^30 >"$out/ks_${p}_$r.txt" 2>&1
    grep -E "^scan +decoupled" "$out/ks_${p}_$r.txt" | awk '{printf "%s %s %s %s | ", $3, $4, $7, $8} NR%3==0 {print ""}'
  done
done
