#!/usr/bin/env bash
# ON the GPU machine (carry .gpu-pack: gpu_kernel_tests, gpu_engine_tests, integration_tests,
# kernel_suite): the build with the deterministic scan's new phase 2 and padding, checked whole:
# every kernel test, the engine tests (the sticky fault alone), the RPC suites on the cuda engine,
# memcheck on the canonical kernel tests; racecheck on the float32 ones that fit its time (also with SUITE_ONLY); then the kernel suite's float scan rows
# (deterministic, look-back, CUB, copy) from 2^12 to 2^30, two rounds. SUITE_ONLY=1: the rows alone.
source scripts/gpu-common.sh >/dev/null
export LD_LIBRARY_PATH=$R
if [ -z "${SUITE_ONLY:-}" ]; then
step kernel tests
timeout 240 $B/gpu_kernel_tests --gtest_brief=1 2>&1 | tee "$out/kernel_tests.log" | tail -3
step engine tests
timeout 240 $B/gpu_engine_tests --gtest_brief=1 --gtest_filter='-StickyFault*:DeviceDrain*' 2>&1 | grep -v '\[info\]' \
  | tee "$out/engine.log" | tail -3
step sticky device fault "(own process: it corrupts the CUDA context)"
timeout 60 $B/gpu_engine_tests --gtest_brief=1 --gtest_filter='StickyFault*' 2>&1 | grep -v '\[info\]' \
  | tee "$out/fault.log" | tail -3
step integration on cuda
GPUSCAN_TEST_ENGINE=cuda timeout 200 $B/integration_tests --gtest_brief=1 2>&1 \
  | grep -v '\[info\]' | grep -v ' -> ' | tee "$out/integration.log" | tail -3
san=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
step memcheck and racecheck, canonical kernel tests
timeout 200 $san --tool memcheck $B/gpu_kernel_tests --gtest_brief=1 --gtest_filter='*anonical*' 2>&1 | tail -2
fi
step racecheck, canonical kernel tests
san=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
timeout 200 $san --tool racecheck --error-exitcode 9 $B/gpu_kernel_tests --gtest_brief=1 \
  --gtest_filter='CanonicalKernelTest.StateOnly*:CanonicalKernelTest.Unaligned*' >"$out/racecheck.log" 2>&1
echo "rc $?"; tail -4 "$out/racecheck.log"
for r in 1 2; do
  step kernel suite float scans round $r
  timeout 200 $B/kernel_suite --ops scan --algorithms deterministic,decoupled_lookback,cub --dtypes float32,float64 \
    --sizes 2^12,2^16,2^20,2^22,2^24,2^26,2^28,2^30 --json "$out/ks_$r.json" >"$out/ks_$r.txt" 2>&1
  echo "rc $?"; grep -E "^scan +(deterministic|decoupled)" "$out/ks_$r.txt" | awk '{print $2, $3, $4, $5, $7, $8, $9}'
done
