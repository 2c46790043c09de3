#!/usr/bin/env bash
# The committed build (4-byte BulkScanTuning::Wide is 128 x 44 for 9 blocks a SM on the H200):
# kernel tests, memcheck on the look-back scan's tests, then the kernel suite, two rounds. Made
# final-h200/ (kind nvidia-h200) and final-h100/ (kind nvidia-h100-x1).
#   here:    scripts/gpu pack --targets "gpu_kernel_tests kernel_suite"
#   device:  run(command="GPU_LOGS_TGZ=logs.tgz bash bench/results/lookback-tiles-2026-11-26/run.sh", carry=[".gpu-pack"], kind="nvidia-h200", timeout_s=590)
# Under $OUT (in logs.tgz): device.txt, ks_final_{1,2}.txt.
source scripts/lib/gpu-common.sh
gpu_setup >/dev/null
step kernel tests
timeout 300 $B/gpu_kernel_tests --gtest_brief=1 2>&1 | tail -4
gpu_sanitize memcheck 'Algorithms/ScanTest.*/decoupled_lookback'
for r in 1 2; do
  step look-back scan round $r
  timeout 200 $B/kernel_suite --ops scan --algorithms decoupled_lookback --dtypes int32,float32,int64,float64 \
    --sizes 2^16,2^20,2^22,2^24,2^26,2^28,2^30 >"$out/ks_final_$r.txt" 2>&1
  echo "rc $?"; grep -E "^scan +decoupled" "$out/ks_final_$r.txt" | awk '{printf "%s %s %s %s %s | ", $3, $4, $5, $7, $8} NR%7==0 {print ""}'
done
