#!/usr/bin/env bash
# ON the GPU machine (carry .gpu-pack: gpu_kernel_tests, kernel_suite of the experiment build):
# the deterministic scan's carry C_b polled beside C_{b-1} and T_{b-1} (GPUSCAN_EXP_CARRY_FAST=1)
# against the committed Carry, same binary: canonical kernel tests and memcheck with it, then the
# two alternating, ROUNDS rounds.
rm -rf .gpu-bin .gpu-rt
source scripts/lib/gpu-common.sh && gpu_setup >/dev/null
export LD_LIBRARY_PATH=$R
if [ -z "${SKIP_TESTS:-}" ]; then
  step kernel tests, fast carry
  GPUSCAN_EXP_CARRY_FAST=1 timeout 300 $B/gpu_kernel_tests --gtest_brief=1 2>&1 | tail -3
  step memcheck, canonical tests, fast carry
  GPUSCAN_EXP_CARRY_FAST=1 timeout 300 compute-sanitizer --tool memcheck --error-exitcode 9 $B/gpu_kernel_tests \
    --gtest_brief=1 --gtest_filter='Canonical*' 2>&1 | tail -3
fi
for r in $(seq 1 ${ROUNDS:-3}); do
  for v in ${VARIANTS:-base fast}; do  # base; fast = fast1: C_b beside C_{b-1} and T_{b-1}; fast2: only j = 0 publishes
    unset GPUSCAN_EXP_CARRY_FAST
    case $v in fast | fast1) export GPUSCAN_EXP_CARRY_FAST=1 ;; fast2) export GPUSCAN_EXP_CARRY_FAST=2 ;; esac
    step $v round $r
    timeout 200 $B/kernel_suite --ops scan --algorithms deterministic --dtypes ${DTYPES:-float32,float64} \
      --sizes ${SIZES:-2^16,2^20,2^24,2^26,2^28,2^30} >"$out/ks_${v}_$r.txt" 2>&1
    echo "rc $?"; grep -E "^scan +determ" "$out/ks_${v}_$r.txt" | awk '{printf "%s %s %s %s %s %s | ", $3, $4, $5, $7, $8, $9} NR%6==0 {print ""}'
  done
done
