#!/usr/bin/env bash
# The committed segmented-scan policy (128 x 24 for 4-byte values under keys of 4 bytes or less):
# kernel tests, memcheck on the segmented tests, the CUDA engine's tests (the sticky fault alone:
# it poisons the CUDA context), then the kernel suite's segmented rows (three rounds) and reduce by
# key (which keeps the register kernel; one round). Made final/.
#   here:    scripts/gpu pack --targets "gpu_kernel_tests gpu_engine_tests kernel_suite"
#   device:  run(command="GPU_LOGS_TGZ=logs.tgz bash bench/results/segmented-bulk-2026-11-26/run.sh", carry=[".gpu-pack"], kind="nvidia-h100-x1", timeout_s=590)
# Under $OUT (in logs.tgz): device.txt, ks_final_{1,2,3}.txt, ks_rbk.txt.
source scripts/lib/gpu-common.sh
gpu_setup >/dev/null
export LD_LIBRARY_PATH=$R
step kernel tests
timeout 300 $B/gpu_kernel_tests --gtest_brief=1 2>&1 | tail -4
gpu_sanitize memcheck '*Segmented*'
step engine tests
timeout 300 $B/gpu_engine_tests --gtest_brief=1 --gtest_filter='-StickyFault*:DeviceDrain*' 2>&1 | tail -4
step sticky device fault "(own process: it corrupts the CUDA context)"
timeout 60 $B/gpu_engine_tests --gtest_brief=1 --gtest_filter='StickyFault*' 2>&1 | tail -3
for r in 1 2 3; do
  step segmented round $r
  timeout 120 $B/kernel_suite --ops segmented_scan --dtypes int32 --sizes 2^16,2^20,2^24,2^26,2^28,2^30 >"$out/ks_final_$r.txt" 2>&1
  echo "rc $?"; grep -E "^segmented_scan fused" "$out/ks_final_$r.txt" | awk '{printf "%s %s %s %s | ", $4, $5, $7, $8} END {print ""}'
done
step reduce by key
timeout 120 $B/kernel_suite --ops reduce_by_key --dtypes int32 --sizes 2^24,2^28,2^30 >"$out/ks_rbk.txt" 2>&1
echo "rc $?"; grep -E "^reduce_by_key fused" "$out/ks_rbk.txt" | awk '{printf "%s %s %s %s | ", $4, $5, $7, $8} END {print ""}'
