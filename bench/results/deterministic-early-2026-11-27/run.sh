#!/usr/bin/env bash
# ON the GPU machine (carry .gpu-pack: gpu_kernel_tests and kernel_suite of the change,
# kernel_suite_main before it): the canonical tests, memcheck and synccheck on the float sweeps,
# then main / new alternating on the deterministic float32 scan (scripts/gpu-ab.sh).
source scripts/gpu-common.sh >/dev/null
export LD_LIBRARY_PATH=$R
step tests
timeout 300 $B/gpu_kernel_tests --gtest_brief=1 --gtest_filter='Canonical*:*Determin*:*Segmented*' 2>&1 | tail -3
san=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
for tool in ${TOOLS:-memcheck synccheck}; do
  step $tool
  timeout 240 $san --tool $tool --error-exitcode 9 $B/gpu_kernel_tests --gtest_brief=1 \
    --gtest_filter='CanonicalKernelTest.Float32Sum:CanonicalKernelTest.Float64Sum' 2>&1 | tail -3
done
ROUNDS=${ROUNDS:-3} bash scripts/gpu-ab.sh --ops scan --algorithms deterministic --dtypes float32 \
  --sizes ${SIZES:-2^16,2^20,2^24,2^26,2^28,2^30}
