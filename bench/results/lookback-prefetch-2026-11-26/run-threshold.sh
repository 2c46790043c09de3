#!/usr/bin/env bash
# ON the GPU machine (carry .gpu-pack: gpu_kernel_tests, kernel_suite with GPUSCAN_PREFETCH=N:
# prefetch from N tiles a launch): where the L2 prefetch starts to pay. Off, from 0, 1500 and 3000
# tiles, alternating, two rounds; the scan tests with the prefetch always on first.
source scripts/lib/gpu-common.sh && gpu_setup >/dev/null
export LD_LIBRARY_PATH=$R
step scan kernel tests, prefetch from 0 tiles
GPUSCAN_PREFETCH=0 timeout 200 $B/gpu_kernel_tests --gtest_brief=1 --gtest_filter='Algorithms/ScanTest.*/decoupled_lookback' 2>&1 | tail -2
for r in 1 2; do
  for p in off 0 1500 3000; do
    step prefetch $p round $r
    if [ $p = off ]; then unset GPUSCAN_PREFETCH; else export GPUSCAN_PREFETCH=$p; fi
    timeout 150 $B/kernel_suite --ops scan --algorithms decoupled_lookback --dtypes int32,float32,int64,float64 \
      --sizes 2^20,2^21,2^22,2^23,2^24,2^26,2^28 >"$out/th_${p}_$r.txt" 2>&1; echo "rc $?"
    grep -E "^scan +decoupled" "$out/th_${p}_$r.txt" | awk '{printf "%s %s %s %s | ", $3, $4, $5, $7} NR%7==0 {print ""}'
  done
done
unset GPUSCAN_PREFETCH
