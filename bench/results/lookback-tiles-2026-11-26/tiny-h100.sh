#!/usr/bin/env bash
# ON the GPU machine (carry .gpu-pack: kernel_suite with the experiment switch GPUSCAN_SCAN_POLICY):
# small calls' tiles (below 2^20 elements, 4-byte SUM). 0 = 128x32 (BulkScanTuning::Small),
# t = 128x8, u = 128x16, v = 256x8, w = 64x16. 301 timed calls a row (median), ROUNDS rounds.
source scripts/lib/gpu-common.sh && gpu_setup >/dev/null
export LD_LIBRARY_PATH=$R
for r in $(seq 1 ${ROUNDS:-2}); do
  for p in ${POLICIES:-0 t u v w}; do
    step policy $p round $r
    GPUSCAN_SCAN_POLICY=$p timeout 150 $B/kernel_suite --ops scan --algorithms decoupled_lookback --dtypes int32,float32 \
      --sizes 2^12,2^14,2^16,2^18 --reps 301 --warmup 20 >"$out/tiny_${p}_$r.txt" 2>&1
    grep -E "^(scan|copy) " "$out/tiny_${p}_$r.txt" | awk '{printf "%s %s %s %s %s | ", $2, $3, $4, $5, $8} NR%3==0 {print ""}'
  done
done
