#!/usr/bin/env bash
# ON the GPU machine (carry .gpu-pack: gpu_kernel_tests, gpu_engine_tests, integration_tests):
# the session's last build checked on the device: every kernel test (compaction's sleeps by
# bandwidth, the 2-D scan's 16-byte path), the engine tests, the RPC suites on the cuda engine
# (the raw Histogram, SegmentedScan and ReduceByKey), memcheck on the 2-D scan and compaction.
# ENGINE_ONLY=1: the engine steps alone (the first run put the sticky-fault test in the main
# process, which poisons the context for the tests after it; gpu-suite.sh runs it alone).
source scripts/gpu-common.sh >/dev/null
export LD_LIBRARY_PATH=$R
if [ -z "${ENGINE_ONLY:-}" ]; then
step kernel tests
timeout 240 $B/gpu_kernel_tests --gtest_brief=1 2>&1 | tee "$out/kernel_tests.log" | tail -3
fi
step engine tests
timeout 240 $B/gpu_engine_tests --gtest_brief=1 --gtest_filter='-StickyFault*:DeviceDrain*' 2>&1 | grep -v '\[info\]' \
  | tee "$out/engine.log" | tail -3
step sticky device fault "(own process: it corrupts the CUDA context)"
timeout 60 $B/gpu_engine_tests --gtest_brief=1 --gtest_filter='StickyFault*' 2>&1 | grep -v '\[info\]' \
  | tee "$out/fault.log" | tail -3
[ -n "${ENGINE_ONLY:-}" ] && exit 0
step integration on cuda
GPUSCAN_TEST_ENGINE=cuda timeout 200 $B/integration_tests --gtest_brief=1 2>&1 \
  | grep -v '\[info\]' | grep -v ' -> ' | tee "$out/integration.log" | tail -3
san=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
step memcheck
timeout 200 $san --tool memcheck $B/gpu_engine_tests --gtest_brief=1 --gtest_filter='*Scan2D*' 2>&1 | tail -2
timeout 200 $san --tool memcheck $B/gpu_kernel_tests --gtest_brief=1 --gtest_filter='*ompact*' 2>&1 | tail -2
