#!/usr/bin/env bash
# The longer look-back sleeps (scan 4-byte 2400/600; scan 8-byte 128 x 32, 2400/1200; compaction
# 2400/1200; segmented scan 2400/600) checked and measured: every kernel test, memcheck on the
# scans of the new 8-byte tile, the engine and RPC suites on the cuda engine, the kernel suite's
# scan, compaction and segmented-scan rows against CUB and a copy (ks_final.txt, cited by
# tuning.cuh), and tune_bench (old policies beside the new).
#   here:    scripts/gpu pack --add tune_bench
#   device:  run(command="bash bench/results/lookback-delays-h100-2026-11-25/run.sh", carry=[".gpu-pack"], kind="nvidia-h100-x1", timeout_s=590)
# Under $OUT: device.txt, kernel_tests.log, engine.log, integration.log, ks_final.{txt,json}, tune_final.txt.
source scripts/lib/gpu-common.sh
gpu_setup
step kernel tests
timeout 240 $B/gpu_kernel_tests --gtest_brief=1 2>&1 | tee "$out/kernel_tests.log" | tail -4
gpu_sanitize memcheck 'Algorithms/ScanTest.Double/decoupled_lookback:Algorithms/ScanTest.SplitOverLaunches/decoupled_lookback:Algorithms/ScanTest.InPlaceAndUnaligned/decoupled_lookback'
step engine tests and the RPC suites on the cuda engine
LD_LIBRARY_PATH=$R timeout 200 $B/gpu_engine_tests --gtest_brief=1 --gtest_filter='-StickyFault*:DeviceDrain*' 2>&1 \
  | grep -v '\[info\]' | tee "$out/engine.log" | tail -3
GPUSCAN_TEST_ENGINE=cuda LD_LIBRARY_PATH=$R timeout 150 $B/integration_tests --gtest_brief=1 2>&1 \
  | grep -v '\[info\]' | grep -v ' -> ' | tee "$out/integration.log" | tail -3
step kernel suite: scan, compaction, segmented scan
timeout 240 $B/kernel_suite --ops scan,compact,segmented_scan --algorithms decoupled_lookback,single_pass,fused \
  --dtypes int32,float32,int64,float64 --sizes 2^16,2^20,2^24,2^28,2^30 \
  --json "$out/ks_final.json" >"$out/ks_final.txt" 2>&1
grep -E "2\^(16|28|30) " "$out/ks_final.txt"
step tune_bench scan scan8 compact
timeout 200 $B/tune_bench scan scan8 compact 2>&1 | tee "$out/tune_final.txt" | grep -E " (268435456|536870912) " | grep -v "delays from\|never delay\|from 500"
