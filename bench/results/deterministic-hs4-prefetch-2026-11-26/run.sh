#!/usr/bin/env bash
# ON the GPU machine (carry .gpu-pack: gpu_kernel_tests and kernel_suite_hs4 built with
# GPUSCAN_EXP_HS4, kernel_suite_p without it, kernel_suite_main = main): the canonical kernel tests
# and memcheck on the HS4 build, then four variants alternating, ROUNDS rounds:
#   main, p (main + GPUSCAN_EXP_PREFETCH: the tile after the next prefetched into L2),
#   hs4 (Hillis-Steele with 4 barriers), hs4p (both).
source scripts/gpu-common.sh >/dev/null
export LD_LIBRARY_PATH=$R
step kernel tests, HS4 build
timeout 300 $B/gpu_kernel_tests --gtest_brief=1 --gtest_filter='Canonical*:*Determin*' 2>&1 | tail -3
step memcheck, canonical tests
timeout 300 compute-sanitizer --tool memcheck --error-exitcode 9 $B/gpu_kernel_tests --gtest_brief=1 \
  --gtest_filter='Canonical*' 2>&1 | tail -3
for r in $(seq 1 ${ROUNDS:-2}); do
  for v in main p hs4 hs4p; do
    bin=$B/kernel_suite_$v; pf=
    case $v in p) bin=$B/kernel_suite_p; pf=1;; hs4p) bin=$B/kernel_suite_hs4; pf=1;; esac
    step $v round $r
    if [ -n "$pf" ]; then export GPUSCAN_EXP_PREFETCH=1; else unset GPUSCAN_EXP_PREFETCH; fi
    timeout 200 $bin --ops scan --algorithms decoupled_lookback,deterministic --dtypes float32,float64 \
      --sizes ${SIZES:-2^20,2^24,2^26,2^28,2^30} >"$out/ks_${v}_$r.txt" 2>&1
    echo "rc $?"; grep -E "^scan +determ" "$out/ks_${v}_$r.txt" | awk '{printf "%s %s %s %s %s | ", $3, $4, $7, $8, $9} NR%5==0 {print ""}'
  done
done
unset GPUSCAN_EXP_PREFETCH
grep -hE "^scan +decoupled" "$out"/ks_main_*.txt | awk '$4=="2^28" || $4=="2^30" {print "look-back", $3, $4, $7}'
