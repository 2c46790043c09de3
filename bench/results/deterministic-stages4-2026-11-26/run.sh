#!/usr/bin/env bash
# ON the GPU machine (carry .gpu-pack: gpu_kernel_tests of the 4-stage build, kernel_suite_main =
# main, kernel_suite_ceil = 3 stages with the ceiling switches, kernel_suite_s4 = float32 with four
# tiles a block (3 blocks a SM), same switches): canonical kernel tests and memcheck on the 4-stage
# build, then alternating ROUNDS rounds: main, s4, and both builds' ceilings 1 (a copy through the
# pipeline) and 3 (phase 1 whole, the tile stored as loaded).
source scripts/gpu-common.sh >/dev/null
export LD_LIBRARY_PATH=$R
step kernel tests, 4-stage build
timeout 300 $B/gpu_kernel_tests --gtest_brief=1 --gtest_filter='Canonical*:*Determin*' 2>&1 | tail -3
step memcheck, canonical tests
timeout 300 compute-sanitizer --tool memcheck --error-exitcode 9 $B/gpu_kernel_tests --gtest_brief=1 \
  --gtest_filter='Canonical*' 2>&1 | tail -3
for r in $(seq 1 ${ROUNDS:-2}); do
  for v in main s4 ceil3 s4ceil1 s4ceil3; do
    unset GPUSCAN_EXP_CEIL
    case $v in
      main) bin=$B/kernel_suite_main;; s4) bin=$B/kernel_suite_s4;;
      ceil3) bin=$B/kernel_suite_ceil; export GPUSCAN_EXP_CEIL=3;;
      s4ceil1) bin=$B/kernel_suite_s4; export GPUSCAN_EXP_CEIL=1;;
      s4ceil3) bin=$B/kernel_suite_s4; export GPUSCAN_EXP_CEIL=3;;
    esac
    step $v round $r
    timeout 200 $bin --ops scan --algorithms decoupled_lookback,deterministic --dtypes float32 \
      --sizes ${SIZES:-2^20,2^24,2^26,2^28,2^30} >"$out/ks_${v}_$r.txt" 2>&1
    echo "rc $?"; grep -E "^scan +determ" "$out/ks_${v}_$r.txt" | awk '{printf "%s %s %s %s %s | ", $3, $4, $7, $8, $9} NR%5==0 {print ""}'
  done
done
unset GPUSCAN_EXP_CEIL
grep -hE "^scan +decoupled" "$out"/ks_main_*.txt | awk '$4=="2^28" || $4=="2^30" {print "look-back", $3, $4, $7}'
