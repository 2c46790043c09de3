#!/usr/bin/env bash
# The deterministic scan's carry polled beside what it is folded from: the committed change
# against main's kernel_suite ("old"). Kernel tests, memcheck on the canonical tests, the engine
# tests if packed, then old / new alternating (scripts/gpu run ab), ROUNDS rounds (default 3), the
# look-back scan and CUB in the same runs. Made final-h100/ and final-h200/ (the H200 without the
# kernel tests) and engine-h200/ (with gpu_engine_tests packed).
#   here:    scripts/gpu pack --targets "gpu_kernel_tests kernel_suite" --extra kernel_suite_old=MAIN_BUILD/bin/kernel_suite
#   device:  run(command="bash bench/results/deterministic-carry-2026-11-26/run.sh", carry=[".gpu-pack"], kind="nvidia-h100-x1", timeout_s=590)
# Under $OUT: device.txt, {old,new}_<round>.txt, summary.txt. SIZES overrides the sizes.
source scripts/lib/gpu-common.sh
gpu_setup >/dev/null
export LD_LIBRARY_PATH=$R
if [ -x "$B/gpu_kernel_tests" ]; then
  step kernel tests
  timeout 300 "$B/gpu_kernel_tests" --gtest_brief=1 2>&1 | tail -3
  gpu_sanitize memcheck 'Canonical*'
fi
if [ -x "$B/gpu_engine_tests" ]; then
  step "engine tests (the sticky fault alone: it corrupts the CUDA context)"
  timeout 300 "$B/gpu_engine_tests" --gtest_brief=1 --gtest_filter='-StickyFault*:DeviceDrain*' 2>&1 | tail -3
  timeout 60 "$B/gpu_engine_tests" --gtest_brief=1 --gtest_filter='StickyFault*' 2>&1 | tail -3
fi
OUT=$out GPU_LOGS_TGZ='' VARIANTS="old new" bash scripts/gpu run ab --ops scan,reduce \
  --algorithms decoupled_lookback,deterministic --dtypes float32,float64 --sizes "${SIZES:-2^16,2^20,2^22,2^24,2^26,2^28,2^30}"
