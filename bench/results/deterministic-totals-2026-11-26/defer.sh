#!/usr/bin/env bash
# ON the GPU machine (carry .gpu-pack: gpu_kernel_tests and kernel_suite of defer.diff: the
# super's last tile looks once in phase 1 for its super's aggregates and computes T_b if they are
# all out, else computes it in its phase 2; GPUSCAN_EXP_NOTRY=1: always in phase 2;
# kernel_suite_main = main): kernel tests (both ways), memcheck and synccheck on the canonical
# tests, then main / try / notry alternating, ROUNDS rounds.
source scripts/gpu-common.sh >/dev/null
export LD_LIBRARY_PATH=$R
if [ -x $B/gpu_kernel_tests ]; then
  step kernel tests
  timeout 300 $B/gpu_kernel_tests --gtest_brief=1 --gtest_filter='Canonical*:*Determin*' 2>&1 | tail -3
  step kernel tests, NOTRY
  GPUSCAN_EXP_NOTRY=1 timeout 300 $B/gpu_kernel_tests --gtest_brief=1 --gtest_filter='Canonical*:*Determin*' 2>&1 | tail -3
  for tool in memcheck synccheck; do
    step $tool, canonical tests
    timeout 300 compute-sanitizer --tool $tool --error-exitcode 9 $B/gpu_kernel_tests --gtest_brief=1 \
      --gtest_filter='Canonical*' 2>&1 | tail -3
  done
fi
for r in $(seq 1 ${ROUNDS:-2}); do
  for v in main try notry; do
    bin=$B/kernel_suite; [ $v = main ] && bin=$B/kernel_suite_main
    if [ $v = notry ]; then export GPUSCAN_EXP_NOTRY=1; else unset GPUSCAN_EXP_NOTRY; fi
    step $v round $r
    timeout 200 $bin --ops scan --algorithms deterministic --dtypes float32,float64 \
      --sizes ${SIZES:-2^20,2^24,2^26,2^28,2^30} >"$out/ks_${v}_$r.txt" 2>&1
    echo "rc $?"; grep -E "^scan +determ" "$out/ks_${v}_$r.txt" | awk '{printf "%s %s %s %s %s | ", $3, $4, $7, $8, $9} NR%5==0 {print ""}'
  done
done
unset GPUSCAN_EXP_NOTRY
