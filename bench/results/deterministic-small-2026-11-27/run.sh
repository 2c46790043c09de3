#!/usr/bin/env bash
# The deterministic scan's small calls (tile by block index) against main: the canonical tests,
# memcheck and racecheck on them, then main / new alternating (scripts/gpu run ab) on the
# deterministic float scans: small sizes at 301 calls a row (small/), then 2^20 to 2^28 (large/),
# ROUNDS rounds each (default 3).
#   here:    scripts/gpu pack --targets "gpu_kernel_tests kernel_suite" --extra kernel_suite_main=MAIN_BUILD/bin/kernel_suite
#   device:  run(command="bash bench/results/deterministic-small-2026-11-27/run.sh", carry=[".gpu-pack"], kind="nvidia-h100-x1", timeout_s=590)
# Under $OUT: device.txt, {small,large}/{main,new}_<round>.txt and summary.txt.
source scripts/lib/gpu-common.sh
gpu_setup >/dev/null
step tests
timeout 300 "$B/gpu_kernel_tests" --gtest_brief=1 --gtest_filter='Canonical*:*Determin*:*Segmented*' 2>&1 | tail -3
for tool in memcheck racecheck; do gpu_sanitize $tool 'CanonicalKernelTest.Float32Sum:CanonicalKernelTest.Float64Sum'; done
ab() {  # ab DIR kernel_suite options...: main / new alternating, logs in $out/DIR
  mkdir -p "$out/$1"
  OUT=$out/$1 GPU_LOGS_TGZ='' bash scripts/gpu run ab --ops scan --algorithms deterministic --dtypes float32,float64 "${@:2}"
}
ab small --sizes 2^12,2^14,2^16,2^17,2^18 --reps 301
ab large --sizes 2^20,2^24,2^28
