#!/usr/bin/env bash
# The committed build of the L2 prefetch before the ticket (prefetch from kBulkPrefetchMinTiles
# tiles, no switch): every kernel test, memcheck on the look-back's scan tests, the engine tests
# and the RPC suites on the cuda engine (CHECKS=0 skips them; a pack without gpu_engine_tests
# skips those two), then ROUNDS (default 2) kernel-suite rounds of the scans. Made final-h100/,
# final-h200/ (ROUNDS=1) and final-h200-first/.
#   here:    scripts/gpu pack --targets "gpu_kernel_tests gpu_engine_tests integration_tests kernel_suite"
#   device:  run(command="bash bench/results/lookback-prefetch-2026-11-26/run.sh", carry=[".gpu-pack"], kind="nvidia-h100-x1", timeout_s=590)
# Under $OUT: device.txt, kernel_tests.log, memcheck.log, engine.log, integration.log, ks_{1,2}.{txt,json}.
source scripts/lib/gpu-common.sh
gpu_setup >/dev/null
export LD_LIBRARY_PATH=$R
if [ "${CHECKS:-1}" = 1 ]; then
  step kernel tests
  timeout 240 $B/gpu_kernel_tests --gtest_brief=1 2>&1 | tee "$out/kernel_tests.log" | tail -3
  gpu_sanitize memcheck 'Algorithms/ScanTest.*/decoupled_lookback'
  if [ -x $B/gpu_engine_tests ]; then  # packs under the 64 MiB limit may leave the service suites out
  step engine tests
  timeout 240 $B/gpu_engine_tests --gtest_brief=1 --gtest_filter='-StickyFault*:DeviceDrain*' 2>&1 | grep -v '\[info\]' \
    | tee "$out/engine.log" | tail -2
  step integration on cuda
  GPUSCAN_TEST_ENGINE=cuda timeout 200 $B/integration_tests --gtest_brief=1 2>&1 \
    | grep -v '\[info\]' | grep -v ' -> ' | tee "$out/integration.log" | tail -3
  fi
fi
for r in $(seq ${ROUNDS:-2}); do
  step kernel suite scans round $r
  timeout 200 $B/kernel_suite --ops scan --algorithms decoupled_lookback,cub --dtypes int32,float32,int64,float64 \
    --sizes 2^10,2^12,2^16,2^20,2^22,2^23,2^24,2^26,2^28,2^30 --json "$out/ks_$r.json" >"$out/ks_$r.txt" 2>&1
  echo "rc $?"; grep -E "^scan +decoupled" "$out/ks_$r.txt" | awk '{printf "%s %s %s %s %s %s | ", $3, $4, $5, $7, $8, $9} NR%10==0 {print ""}'
done
