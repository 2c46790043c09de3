#!/usr/bin/env bash
# ON the GPU machine (carry .gpu-pack: kernel_suite with the experiment switch GPUSCAN_SCAN_POLICY):
# small calls (below 2^20 elements, 4-byte SUM) whose blocks prefetch tile blockIdx.x into L2
# before drawing the ticket, as launches of 4096 tiles or more do. 0 = 128x32 (Small, no
# prefetch below 4096 tiles), p = 128x32 prefetching, q = 128x16 prefetching. 301 timed calls
# a row (median), ROUNDS rounds, alternating.
source scripts/lib/gpu-common.sh && gpu_setup >/dev/null
export LD_LIBRARY_PATH=$R
for r in $(seq 1 ${ROUNDS:-3}); do
  for p in ${POLICIES:-0 p q}; do
    step policy $p round $r
    GPUSCAN_SCAN_POLICY=$p timeout 150 $B/kernel_suite --ops scan --algorithms decoupled_lookback --dtypes int32,float32 \
      --sizes 2^12,2^14,2^16,2^18,2^19 --reps 301 --warmup 20 >"$out/small_${p}_$r.txt" 2>&1
    grep -E "^(scan|copy) " "$out/small_${p}_$r.txt" | awk '{printf "%s %s %s %s %s | ", $2, $3, $4, $5, $8} NR%3==0 {print ""}'
  done
done
