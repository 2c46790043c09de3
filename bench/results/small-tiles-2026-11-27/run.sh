#!/usr/bin/env bash
# Small look-back scans, A/B: the scan tests and compute-sanitizer on the look-back scan's, then
# main / idx (the tile by block index only) / new (the Tiny policy too) alternating on small 4-byte
# look-back scans (scripts/gpu run ab), ROUNDS rounds, 301 calls a row. Made h100-ab/ and
# summary-ab.txt (ROUNDS=3).
#   here:    scripts/gpu pack --targets "gpu_kernel_tests kernel_suite" --extra kernel_suite_main=MAIN_BUILD/bin/kernel_suite --extra kernel_suite_idx=IDX_BUILD/bin/kernel_suite
#   device:  run(command="ROUNDS=3 GPU_LOGS_TGZ=x.tgz bash bench/results/small-tiles-2026-11-27/run.sh", carry=[".gpu-pack"], kind="nvidia-h100-x1", timeout_s=590)
# Under $OUT (in x.tgz): device.txt, {main,idx,new}_<round>.txt, summary.txt.
source scripts/lib/gpu-common.sh
gpu_setup >/dev/null
step tests
timeout 300 "$B/gpu_kernel_tests" --gtest_brief=1 --gtest_filter='*ScanTest*:*Segmented*' 2>&1 | tail -3
for tool in memcheck racecheck; do gpu_sanitize $tool 'Algorithms/ScanTest.*/decoupled_lookback-*Large*:*SplitOver*'; done
OUT=$out GPU_LOGS_TGZ='' VARIANTS="main idx new" bash scripts/gpu run ab --ops scan --algorithms decoupled_lookback \
  --dtypes int32,float32 --sizes 2^10,2^12,2^13,2^14,2^15,2^16,2^17,2^18,2^20 --reps 301
