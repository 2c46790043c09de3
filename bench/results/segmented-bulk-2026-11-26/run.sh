#!/usr/bin/env bash
# ON the GPU machine (carry .gpu-pack: gpu_kernel_tests, kernel_suite): the segmented scan on the
# bulk look-back kernel (values and keys in shared memory by bulk copies). Kernel tests and
# memcheck first, then the kernel suite's segmented rows (two rounds) and the plain look-back
# scan's (whose kernel now takes its tile through the same IO hooks).
source scripts/lib/gpu-common.sh && gpu_setup >/dev/null
export LD_LIBRARY_PATH=$R
step kernel tests
timeout 300 $B/gpu_kernel_tests --gtest_brief=1 2>&1 | tail -4
step memcheck, segmented and look-back scan tests
timeout 300 compute-sanitizer --tool memcheck --error-exitcode 9 $B/gpu_kernel_tests --gtest_brief=1 \
  --gtest_filter='*Segmented*:Algorithms/ScanTest.*/decoupled_lookback:*LookBack*' 2>&1 | tail -4
for r in 1 2; do
  step segmented round $r
  timeout 120 $B/kernel_suite --ops segmented_scan --dtypes int32 --sizes 2^16,2^20,2^24,2^26,2^28,2^30 >"$out/ks_seg_$r.txt" 2>&1
  echo "rc $?"; grep -E "^segmented_scan " "$out/ks_seg_$r.txt" | awk '{printf "%s %s %s %s %s | ", $2, $4, $5, $7, $8} END {print ""}'
done
step look-back scan
timeout 150 $B/kernel_suite --ops scan --algorithms decoupled_lookback,cub --dtypes int32,float32,int64,float64 \
  --sizes 2^16,2^20,2^24,2^28,2^30 >"$out/ks_scan.txt" 2>&1
echo "rc $?"; grep -E "^scan +decoupled" "$out/ks_scan.txt" | awk '{printf "%s %s %s %s %s | ", $3, $4, $5, $7, $8} NR%5==0 {print ""}'
