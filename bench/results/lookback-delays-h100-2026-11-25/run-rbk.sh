#!/usr/bin/env bash
# ON the GPU machine: reduce by key with the scan's longer first delay (2400/600 ns; lost, reverted):
# its kernel and engine tests, and the kernel suite's row against cub::DeviceReduce::ReduceByKey.
source scripts/gpu-common.sh
step reduce by key tests
timeout 200 $B/gpu_kernel_tests --gtest_brief=1 --gtest_filter='*ReduceByKey*' 2>&1 | tail -3
LD_LIBRARY_PATH=$R timeout 150 $B/gpu_engine_tests --gtest_brief=1 --gtest_filter='*ReduceByKey*:*Segmented*' 2>&1 | grep -v '\[info\]' | tail -3
step kernel suite, reduce by key, two rounds
for r in 1 2; do
timeout 150 $B/kernel_suite --ops reduce_by_key --dtypes int32 --sizes 2^16,2^20,2^24,2^28,2^30 >"$out/ks_rbk_2400_600_round$r.txt" 2>&1
grep -E "reduce_by_key" "$out/ks_rbk_2400_600_round$r.txt"
done
