#!/usr/bin/env bash
# Issue 47 (narrow inputs, wide results) on the GPU machine: the kernel tests (ScanWiden*, and the
# plain scans' and the other kernels' tests, whose agents the widening scans share), the kernel
# suite's plain scan rows (int32, float32, int64: look-back and deterministic beside CUB) for
# regression, and its scan_widen rows (int8 -> int64 exclusive and float16 -> float32 inclusive,
# each beside the device copy of the same bytes and CUB over a converting transform iterator), all
# in one run.
#   here:    scripts/gpu pack --targets "gpu_kernel_tests kernel_suite tune_bench"
#   device:  run(command="bash bench/results/scan-widen-h100-2026-11-27/run.sh", carry=[".gpu-pack"], kind="nvidia-h100-x1", timeout_s=590)
# Under $OUT: device.txt, tests.log, suite.txt, suite.json (and tune.txt with WIDEN_TUNE=1: the
# candidate designs of tune_bench widen).
# WIDEN_TEST_FILTER / WIDEN_SUITE_ARGS override what runs; WIDEN_TESTS=0 / WIDEN_SUITE=0 skip a part.
source scripts/lib/gpu-common.sh
gpu_setup

if [ "${WIDEN_TUNE:-0}" = 1 ]; then
  step "tune_bench widen (candidate designs)"
  timeout 200 $B/tune_bench widen 2>&1 | tee "$out/tune.txt"
fi

if [ "${WIDEN_TESTS:-1}" != 0 ]; then
  step kernel tests
  timeout 300 $B/gpu_kernel_tests --gtest_filter="${WIDEN_TEST_FILTER:-*}" 2>&1 | tee "$out/tests.log" \
    | grep -E "FAILED|Failure|SKIPPED|tests ran|PASSED" | tail -25
  grep -E "^\[ +(OK|FAILED|SKIPPED) +\] ScanWiden" "$out/tests.log" | head -20
fi

[ "${WIDEN_SUITE:-1}" = 0 ] && exit 0
step "kernel suite: plain scans (regression) and scan_widen"
timeout 200 $B/kernel_suite ${WIDEN_SUITE_ARGS:---ops scan,scan_widen --dtypes int32,float32,int64 \
  --algorithms decoupled_lookback,deterministic,fused --sizes 2^24,2^28,2^30 --reps 25} \
  --json "$out/suite.json" 2>&1 | tee "$out/suite.txt"
