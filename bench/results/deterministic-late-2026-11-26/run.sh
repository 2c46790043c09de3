#!/usr/bin/env bash
# ON the GPU machine (carry .gpu-pack: gpu_kernel_tests and kernel_suite of late.diff: float32 with
# four tiles a block, phase 1 on the tile that just landed and phase 2 two tiles later (an
# iteration more between a super's aggregates and its successors' carries), the supers' totals by
# a ninth warp, or waited for in phase 1 as main with GPUSCAN_EXP_BLOCKTOTAL=1;
# kernel_suite_main = main): canonical tests both ways, memcheck and synccheck, then main / late /
# late+blocking totals alternating, ROUNDS rounds.
source scripts/gpu-common.sh >/dev/null
export LD_LIBRARY_PATH=$R
step canonical tests
timeout 300 $B/gpu_kernel_tests --gtest_brief=1 --gtest_filter='Canonical*:*Determin*' 2>&1 | tail -3
step canonical tests, blocking totals
GPUSCAN_EXP_BLOCKTOTAL=1 timeout 300 $B/gpu_kernel_tests --gtest_brief=1 --gtest_filter='Canonical*:*Determin*' 2>&1 | tail -3
for tool in memcheck synccheck; do
  step $tool, canonical tests
  timeout 300 compute-sanitizer --tool $tool --error-exitcode 9 $B/gpu_kernel_tests --gtest_brief=1 \
    --gtest_filter='Canonical*' 2>&1 | tail -3
done
for r in $(seq 1 ${ROUNDS:-2}); do
  for v in main late block; do
    bin=$B/kernel_suite; [ $v = main ] && bin=$B/kernel_suite_main
    if [ $v = block ]; then export GPUSCAN_EXP_BLOCKTOTAL=1; else unset GPUSCAN_EXP_BLOCKTOTAL; fi
    step $v round $r
    timeout 100 $bin --ops scan --algorithms deterministic --dtypes float32 \
      --sizes 2^20,2^24,2^26,2^28,2^30 >"$out/ks_${v}_$r.txt" 2>&1
    echo "rc $?"; grep -E "^scan +determ" "$out/ks_${v}_$r.txt" | awk '{printf "%s %s %s %s %s | ", $3, $4, $7, $8, $9} NR%5==0 {print ""}'
  done
done
