#!/usr/bin/env bash
# ON the GPU machine (carry .gpu-pack: kernel_suite built with the experiment switch
# GPUSCAN_SCAN_SLEEPS, since removed): the H200's 4-byte Wide tiles (128 x 36) with other
# look-back sleeps (first / poll ns): 0 = 2400/600 (the policy), a = 1600/400, b = 2000/500,
# c = 1200/300, d = 3200/800, e = 1600/800. Alternating, two rounds.
source scripts/lib/gpu-common.sh && gpu_setup >/dev/null
export LD_LIBRARY_PATH=$R
for r in 1 2; do
  for p in 0 a b c d e; do
    step sleeps $p round $r
    GPUSCAN_SCAN_SLEEPS=$p timeout 150 $B/kernel_suite --ops scan --algorithms decoupled_lookback --dtypes int32,float32 \
      --sizes 2^26,2^28,2^30 >"$out/ks_${p}_$r.txt" 2>&1
    grep -E "^scan +decoupled" "$out/ks_${p}_$r.txt" | awk '{printf "%s %s %s %s | ", $3, $4, $7, $8} NR%3==0 {print ""}'
  done
done
