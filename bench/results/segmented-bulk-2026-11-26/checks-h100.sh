#!/usr/bin/env bash
# ON the GPU machine (carry .gpu-pack: gpu_kernel_tests, gpu_engine_tests, integration_tests and
# their libraries): the session's last build on an H100: kernel tests, the CUDA engine's tests
# (the sticky fault in its own process), and the RPC suites on the cuda engine.
source scripts/lib/gpu-common.sh && gpu_setup >/dev/null
export LD_LIBRARY_PATH=$R
step kernel tests
timeout 300 $B/gpu_kernel_tests --gtest_brief=1 2>&1 | tail -3
step engine tests
timeout 200 $B/gpu_engine_tests --gtest_brief=1 --gtest_filter='-StickyFault*:DeviceDrain*' 2>&1 | grep -v '\[info\]' | tail -3
step sticky fault alone
timeout 60 $B/gpu_engine_tests --gtest_brief=1 --gtest_filter='StickyFault*' 2>&1 | grep -v '\[info\]' | tail -2
step integration suites on the cuda engine
GPUSCAN_TEST_ENGINE=cuda timeout 240 $B/integration_tests --gtest_brief=1 2>&1 | grep -v '\[info\]' | tail -4
