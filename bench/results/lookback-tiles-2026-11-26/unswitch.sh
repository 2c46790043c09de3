#!/usr/bin/env bash
# ON the GPU machine (carry .gpu-pack: kernel_suite_old = 91ddf3a, kernel_suite = the bulk kernel
# with its inclusive/exclusive choice made once a tile instead of once an item): A/B, alternating,
# ROUNDS rounds, every dtype.
source scripts/lib/gpu-common.sh && gpu_setup >/dev/null
export LD_LIBRARY_PATH=$R
for r in $(seq 1 ${ROUNDS:-3}); do
  for b in kernel_suite_old kernel_suite; do
    step $b round $r
    timeout 200 $B/$b --ops scan --algorithms decoupled_lookback --dtypes int32,float32,int64,float64 \
      --sizes 2^16,2^24,2^26,2^28,2^30 >"$out/${b}_$r.txt" 2>&1
    grep -E "^scan +decoupled" "$out/${b}_$r.txt" | awk '{printf "%s %s %s %s | ", $3, $4, $7, $8} NR%5==0 {print ""}'
  done
done
