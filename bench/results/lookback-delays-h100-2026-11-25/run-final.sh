#!/usr/bin/env bash
# ON the GPU machine (repo root, .gpu-pack carried): the longer look-back delays (scan 4-byte
# 2400/600; scan 8-byte 128 x 32, 2400/1200; compaction 2400/1200; segmented scan 2400/600)
# checked and measured: every kernel test, memcheck on the scans of the new 8-byte tile, the
# engine and RPC suites on the cuda engine, tune_bench (old policies beside the new) and the
# kernel suite's scan, compaction and segmented-scan rows against CUB and a copy.
source scripts/gpu-common.sh
step kernel tests
timeout 240 $B/gpu_kernel_tests --gtest_brief=1 2>&1 | tee "$out/kernel_tests.log" | tail -4
step memcheck on the scans
san=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
timeout 150 "$san" --tool memcheck --error-exitcode 9 $B/gpu_kernel_tests --gtest_brief=1 \
  --gtest_filter='Algorithms/ScanTest.Double/decoupled_lookback:Algorithms/ScanTest.SplitOverLaunches/decoupled_lookback:Algorithms/ScanTest.InPlaceAndUnaligned/decoupled_lookback' 2>&1 \
  | tail -3; echo "memcheck exit ${PIPESTATUS[0]}"
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
