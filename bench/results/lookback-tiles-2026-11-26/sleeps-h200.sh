#!/usr/bin/env bash
# ON the GPU machine (carry .gpu-pack: kernel_suite with the experiment switch GPUSCAN_SCAN_POLICY,
# since removed): the look-back sleeps of the H200's 4-byte Wide tiles (128 x 44, 9 blocks a SM).
# 0 = 2400/600 (the policy), a = 2800/700, b = 3200/800, c = 3600/900, d = 2000/500 ns.
source scripts/lib/gpu-common.sh && gpu_setup >/dev/null
export LD_LIBRARY_PATH=$R
for r in $(seq 1 ${ROUNDS:-3}); do
  for p in ${POLICIES:-0 a b c d}; do
    step policy $p round $r
    GPUSCAN_SCAN_POLICY=$p timeout 150 $B/kernel_suite --ops scan --algorithms decoupled_lookback --dtypes int32,float32 \
      --sizes 2^26,2^28,2^30 >"$out/ks_${p}_$r.txt" 2>&1
    grep -E "^scan +decoupled" "$out/ks_${p}_$r.txt" | awk '{printf "%s %s %s %s | ", $3, $4, $7, $8} NR%3==0 {print ""}'
  done
done
