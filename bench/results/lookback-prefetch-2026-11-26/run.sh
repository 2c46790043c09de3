#!/usr/bin/env bash
# ON the GPU machine (carry .gpu-pack: gpu_kernel_tests, kernel_suite built with the experiment
# switch GPUSCAN_PREFETCH): the bulk look-back kernel with and without an L2 prefetch of tile
# blockIdx.x issued before the ticket is drawn; scan tests with the prefetch on, then the kernel
# suite's look-back rows, off and on alternating.
source scripts/lib/gpu-common.sh && gpu_setup >/dev/null
export LD_LIBRARY_PATH=$R
step scan kernel tests, prefetch on
GPUSCAN_PREFETCH=1 timeout 200 $B/gpu_kernel_tests --gtest_brief=1 --gtest_filter='Algorithms/ScanTest.*/decoupled_lookback' 2>&1 | tail -3
for r in 1 2; do
  for p in 0 1; do
    step prefetch $p round $r
    GPUSCAN_PREFETCH=$p timeout 150 $B/kernel_suite --ops scan --algorithms decoupled_lookback --dtypes int32,float32,int64,float64 \
      --sizes 2^12,2^16,2^20,2^22,2^24,2^28,2^30 >"$out/ks_p${p}_$r.txt" 2>&1; echo "rc $?"
    grep -E "^scan +decoupled" "$out/ks_p${p}_$r.txt" | awk '{printf "%s %s %s %s %s | ", $3, $4, $5, $7, $8} NR%7==0 {print ""}'
  done
done
