#!/usr/bin/env bash
# The deterministic scan with a super's total computed beside the carry, against main: the
# canonical, deterministic and segmented kernel tests (when the pack has gpu_kernel_tests), then
# main / new alternating (scripts/gpu run ab), float32 and float64 at 2^20, 2^24, 2^28, 2^30,
# ROUNDS rounds. Made the folders README.md names for this script (ROUNDS=3), h100-final and h200-final
# among them; README.md says which version each measured.
#   here:    scripts/gpu pack --targets "gpu_kernel_tests kernel_suite" --extra kernel_suite_main=MAIN_BUILD/bin/kernel_suite
#   device:  run(command="ROUNDS=3 bash bench/results/deterministic-overlap-2026-11-26/run.sh", carry=[".gpu-pack"], kind="nvidia-h100-x1", timeout_s=590)
# Under $OUT: device.txt, {main,new}_<round>.txt, summary.txt.
source scripts/lib/gpu-common.sh
gpu_setup >/dev/null
if [ -x "$B/gpu_kernel_tests" ]; then
  step canonical tests
  timeout 200 "$B/gpu_kernel_tests" --gtest_brief=1 --gtest_filter='Canonical*:*Determin*:*Segmented*' 2>&1 | tail -3
fi
OUT=$out GPU_LOGS_TGZ='' bash scripts/gpu run ab --ops scan --algorithms deterministic --dtypes float32,float64 \
  --sizes 2^20,2^24,2^28,2^30
