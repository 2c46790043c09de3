#!/usr/bin/env bash
# ON the GPU machine (carry .gpu-pack: gpu_kernel_tests and kernel_suite of the experiment build,
# kernel_suite_old = main before it): the deterministic scan's 4-byte tiles moved by bulk copies
# (GPUSCAN_EXP_BULK=1) against the same build without (=0) and main. Kernel tests and memcheck
# on the canonical tests with bulk copies, then old / new / bulk alternating, ROUNDS rounds.
rm -rf .gpu-bin .gpu-rt
source scripts/gpu-common.sh >/dev/null
export LD_LIBRARY_PATH=$R
for bulk in ${TEST_BULK-1}; do
  step kernel tests, bulk $bulk
  GPUSCAN_EXP_BULK=$bulk timeout 300 $B/gpu_kernel_tests --gtest_brief=1 2>&1 | tail -4
done
for tool in ${TOOLS-memcheck synccheck}; do
  step $tool, canonical tests, bulk
  GPUSCAN_EXP_BULK=1 timeout 300 compute-sanitizer --tool $tool --error-exitcode 9 $B/gpu_kernel_tests \
    --gtest_brief=1 --gtest_filter='Canonical*' 2>&1 | tail -3
done
for r in $(seq 1 ${ROUNDS:-2}); do
  for v in ${VARIANTS:-old new bulk}; do
    bin=$B/kernel_suite; [ $v = old ] && bin=$B/kernel_suite_old
    bulk=0; [ $v = bulk ] && bulk=1
    step $v round $r
    GPUSCAN_EXP_BULK=$bulk timeout 200 $bin --ops scan --algorithms decoupled_lookback,deterministic \
      --dtypes ${DTYPES:-float32,float64} --sizes ${SIZES:-2^16,2^20,2^24,2^26,2^28,2^30} >"$out/ks_${v}_$r.txt" 2>&1
    echo "rc $?"; grep -E "^(scan|reduce) +determ" "$out/ks_${v}_$r.txt" | awk '{printf "%s %s %s %s %s %s | ", $3, $4, $5, $7, $8, $9} NR%6==0 {print ""}'
  done
done
grep -hE "^scan +decoupled" "$out"/ks_new_*.txt | awk '$4=="2^28" {print "look-back", $3, $4, $7}'
