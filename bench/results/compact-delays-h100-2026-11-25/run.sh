#!/usr/bin/env bash
# ON the GPU machine (carry .gpu-pack: tune_bench, gpu_kernel_tests, kernel_suite,
# gpu_engine_tests, integration_tests), H100: the compaction look-back's sleeps are now a launch
# argument chosen by the device's bandwidth (tuning.cuh CompactDelays; the H100 keeps 2400/1200).
# Checks: every kernel test, the engine and RPC suites on the cuda engine; then the sleeps swept
# here too and the kernel suite's compaction rows (were 92.6-96.0% of copy at 2^28 before).
source scripts/gpu-common.sh >/dev/null
export LD_LIBRARY_PATH=$R
step kernel tests
timeout 240 $B/gpu_kernel_tests --gtest_brief=1 2>&1 | tee "$out/kernel_tests.log" | tail -3
step engine tests
timeout 240 $B/gpu_engine_tests --gtest_brief=1 --gtest_filter='-StickyFault*:DeviceDrain*' 2>&1 \
  | grep -v '\[info\]' | tee "$out/engine.log" | tail -3
step integration on cuda
GPUSCAN_TEST_ENGINE=cuda timeout 200 $B/integration_tests --gtest_brief=1 2>&1 \
  | grep -v '\[info\]' | grep -v ' -> ' | tee "$out/integration.log" | tail -3
step memcheck compaction
san=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
timeout 200 $san --tool memcheck $B/gpu_kernel_tests --gtest_brief=1 --gtest_filter='*ompact*' 2>&1 | tail -2
step tune_bench compact
timeout 200 $B/tune_bench compact >"$out/tune_compact.txt" 2>&1; echo "rc $?"
head -1 "$out/tune_compact.txt"; grep -E " 268435456 " "$out/tune_compact.txt"
for r in 1 2; do
  step kernel suite compaction and 2-D round $r
  timeout 200 $B/kernel_suite --ops compact,scan2d --dtypes int32,float32,int64,float64 --sizes 2^24,2^28,2^30 \
    --json "$out/ks_$r.json" >"$out/ks_$r.txt" 2>&1
  echo "rc $?"; grep -E "^(compact|scan2d) " "$out/ks_$r.txt" | grep -v " cub " | awk '{print $1, $2, $3, $4, $5, $7, $8}'
done
