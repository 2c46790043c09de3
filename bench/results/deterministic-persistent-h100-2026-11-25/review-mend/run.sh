#!/usr/bin/env bash
# ON the GPU machine (device `run`, repo root, carry .gpu-pack): after the review mend (the
# launch setup worked out once per device; one IsInclusive check for the three copies): the
# canonical kernel tests, the engine's determinism tests, the deterministic RPC tests, memcheck,
# and one kernel-suite round (deterministic against CUB).
source scripts/gpu-common.sh
san=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
timeout 120 $B/gpu_kernel_tests --gtest_brief=1 --gtest_filter='CanonicalKernel*:*Scan*' 2>&1 | tail -2
timeout 150 "$san" --tool memcheck --error-exitcode 9 $B/gpu_kernel_tests --gtest_brief=1 \
  --gtest_filter='CanonicalKernelTest.Float32Sum:CanonicalKernelTest.StateOnly*' >"$out/memcheck.txt" 2>&1
echo "memcheck exit $?"; tail -1 "$out/memcheck.txt"
LD_LIBRARY_PATH=$R timeout 200 $B/gpu_engine_tests --gtest_brief=1 --gtest_filter='CudaDeterministic*:*Segmented*:*ReduceEveryDType*' 2>&1 | tail -2
GPUSCAN_TEST_ENGINE=cuda LD_LIBRARY_PATH=$R timeout 200 $B/integration_tests --gtest_brief=1 \
  --gtest_filter='*Deterministic*:*Segmented*' 2>&1 | grep -v '\[info\]' | grep -v ' -> ' | tail -2
timeout 200 $B/kernel_suite --ops scan --algorithms deterministic,cub --dtypes float32,float64 \
  --sizes 2^16,2^20,2^24,2^28,2^30 --reps 15 >"$out/ks.txt" 2>&1
grep -E "deterministic|cub .*2\^28" "$out/ks.txt"
