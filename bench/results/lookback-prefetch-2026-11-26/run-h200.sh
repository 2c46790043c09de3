#!/usr/bin/env bash
# ON an H200 (carry .gpu-pack: gpu_kernel_tests, kernel_suite with GPUSCAN_PREFETCH=N, the
# threshold build): the L2 prefetch always on (N = 0) against off, alternating, two rounds.
source scripts/lib/gpu-common.sh && gpu_setup >/dev/null
export LD_LIBRARY_PATH=$R
step scan kernel tests, prefetch on
GPUSCAN_PREFETCH=0 timeout 200 $B/gpu_kernel_tests --gtest_brief=1 --gtest_filter='Algorithms/ScanTest.*/decoupled_lookback' 2>&1 | tail -2
for r in 1 2; do
  for p in off 0; do
    step prefetch $p round $r
    if [ $p = off ]; then unset GPUSCAN_PREFETCH; else export GPUSCAN_PREFETCH=$p; fi
    timeout 150 $B/kernel_suite --ops scan --algorithms decoupled_lookback --dtypes int32,float32,int64,float64 \
      --sizes 2^16,2^20,2^22,2^24,2^26,2^28,2^30 >"$out/h200_${p}_$r.txt" 2>&1; echo "rc $?"
    grep -E "^scan +decoupled" "$out/h200_${p}_$r.txt" | awk '{printf "%s %s %s %s %s | ", $3, $4, $5, $7, $8} NR%7==0 {print ""}'
  done
done
unset GPUSCAN_PREFETCH
