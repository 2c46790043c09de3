#!/usr/bin/env bash
# The compaction tuning of 2026-11-25 (slim gather, long tiles) checked and measured: every kernel
# test, compute-sanitizer on the compaction tests, the engine's and the RPCs' compaction tests on
# the cuda engine, tune_bench compact (old defaults beside the new) and the kernel suite's
# compaction rows against CUB and a copy (ks_compact.txt, cited by tuning.cuh and RESULTS.md).
#   here:    scripts/gpu pack --add tune_bench
#   device:  run(command="bash bench/results/compact-gather-h100-2026-11-25/run.sh", carry=[".gpu-pack"], kind="nvidia-h100-x1", timeout_s=590)
# Under $OUT: device.txt, kernel_tests.log, tune_compact_final.txt, ks_compact.{txt,json}.
source scripts/lib/gpu-common.sh
gpu_setup
step kernel tests
timeout 240 $B/gpu_kernel_tests --gtest_brief=1 2>&1 | tee "$out/kernel_tests.log" | tail -4
gpu_sanitize memcheck 'GpuTest.CompactSplitOverLaunches:Impl/CompactTest.Int32/own:Impl/CompactTest.Double/own'
step engine and RPC compaction on the cuda engine
LD_LIBRARY_PATH=$R timeout 150 $B/gpu_engine_tests --gtest_brief=1 --gtest_filter='*Compact*' 2>&1 | grep -v '\[info\]' | tail -3
GPUSCAN_TEST_ENGINE=cuda LD_LIBRARY_PATH=$R timeout 150 $B/integration_tests --gtest_brief=1 --gtest_filter='*Compact*' 2>&1 \
  | grep -v '\[info\]' | grep -v ' -> ' | tail -3
step tune_bench compact
timeout 120 $B/tune_bench compact 2>&1 | tee "$out/tune_compact_final.txt" | grep -E "268435456"
step kernel suite, compaction
timeout 200 $B/kernel_suite --ops compact --dtypes int32,float32,int64,float64,uint32,uint64 --sizes 2^16,2^20,2^24,2^28,2^30 \
  --json "$out/ks_compact.json" >"$out/ks_compact.txt" 2>&1
grep -E "2\^(16|28|30) " "$out/ks_compact.txt"
