#!/usr/bin/env bash
# ON the GPU machine (carry .gpu-pack: gpu_kernel_tests and kernel_suite of ahead.diff plus a
# switch, GPUSCAN_EXP_BLOCKTOTAL=1: the super's last tile waits in phase 1 for its super's
# aggregates as main does, also when it goes ahead; kernel_suite_main = main): canonical tests
# with the switch, then main / ahead / ahead+blocking totals alternating, float32, ROUNDS rounds.
source scripts/gpu-common.sh >/dev/null
export LD_LIBRARY_PATH=$R
step canonical tests, blocking totals
GPUSCAN_EXP_BLOCKTOTAL=1 timeout 300 $B/gpu_kernel_tests --gtest_brief=1 --gtest_filter='Canonical*:*Determin*' 2>&1 | tail -3
for r in $(seq 1 ${ROUNDS:-2}); do
  for v in main ahead block; do
    bin=$B/kernel_suite; [ $v = main ] && bin=$B/kernel_suite_main
    if [ $v = block ]; then export GPUSCAN_EXP_BLOCKTOTAL=1; else unset GPUSCAN_EXP_BLOCKTOTAL; fi
    step $v round $r
    timeout 100 $bin --ops scan --algorithms deterministic --dtypes float32 \
      --sizes 2^22,2^24,2^26,2^28,2^30 >"$out/ks_${v}_$r.txt" 2>&1
    echo "rc $?"; grep -E "^scan +determ" "$out/ks_${v}_$r.txt" | awk '{printf "%s %s %s %s %s | ", $3, $4, $7, $8, $9} NR%5==0 {print ""}'
  done
done
