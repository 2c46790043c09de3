#!/usr/bin/env bash
# The build whose look-back scan keeps its tile in shared memory (agent_single_pass_bulk.cuh),
# checked whole: every kernel test, memcheck and racecheck on the scan tests, the engine tests
# (the sticky fault alone), the RPC suites on the cuda engine; then tune_bench scan and scan8 (the
# register kernel and the bulk runners-up beside the default, every output checked against CUB's)
# and two rounds of the kernel suite's scan rows. (tune_explore_h100.txt is the first, exploratory run.)
#   here:    scripts/gpu pack --add tune_bench
#   device:  run(command="bash bench/results/lookback-bulk-2026-11-26/run.sh", carry=[".gpu-pack"], kind="nvidia-h100-x1", timeout_s=590)
# SUITE_ONLY=1: the benchmarks alone; TESTS_ONLY=1: the checks alone.
source scripts/lib/gpu-common.sh
gpu_setup >/dev/null
export LD_LIBRARY_PATH=$R
if [ -z "${SUITE_ONLY:-}" ]; then
  step kernel tests
  timeout 240 $B/gpu_kernel_tests --gtest_brief=1 2>&1 | tee "$out/kernel_tests.log" | tail -3
  gpu_sanitize memcheck 'Algorithms/ScanTest.*/decoupled_lookback'
  gpu_sanitize racecheck 'Algorithms/ScanTest.Int32/decoupled_lookback:Algorithms/ScanTest.InPlaceAndUnaligned/decoupled_lookback'
  step engine tests
  timeout 240 $B/gpu_engine_tests --gtest_brief=1 --gtest_filter='-StickyFault*:DeviceDrain*' 2>&1 | grep -v '\[info\]' \
    | tee "$out/engine.log" | tail -3
  step sticky device fault "(own process: it corrupts the CUDA context)"
  timeout 60 $B/gpu_engine_tests --gtest_brief=1 --gtest_filter='StickyFault*' 2>&1 | grep -v '\[info\]' \
    | tee "$out/fault.log" | tail -3
  step integration on cuda
  GPUSCAN_TEST_ENGINE=cuda timeout 200 $B/integration_tests --gtest_brief=1 2>&1 \
    | grep -v '\[info\]' | grep -v ' -> ' | tee "$out/integration.log" | tail -3
fi
[ -n "${TESTS_ONLY:-}" ] && exit 0
step tune_bench scan scan8
timeout 400 $B/tune_bench scan scan8 >"$out/tune.txt" 2>&1; echo "rc $?"
grep -c MISMATCH "$out/tune.txt"
grep -E "^== | (65536|16777216|268435456|1073741824|536870912) " "$out/tune.txt" | grep -E "==|copy|cub|default|register|bulk"
for r in 1 2; do
  step kernel suite scans round $r
  timeout 200 $B/kernel_suite --ops scan --algorithms decoupled_lookback,cub --dtypes int32,float32,int64,float64 \
    --sizes 2^10,2^12,2^16,2^20,2^22,2^24,2^26,2^28,2^30 --json "$out/ks_$r.json" >"$out/ks_$r.txt" 2>&1
  echo "rc $?"; grep -E "^scan +decoupled" "$out/ks_$r.txt" | awk '{print $2, $3, $4, $5, $7, $8, $9}'
done
