#!/usr/bin/env bash
# The committed build on an H200 (an H100 may come instead: device.txt says): kernel, engine and
# RPC suites on the cuda engine, memcheck on the 2-D scan, then the kernel suite's scan,
# compaction and 2-D rows against CUB and the copy, and tune_bench's candidate policies, for
# issue 11's rows on this device.
#   here:    scripts/gpu pack --targets "gpu_kernel_tests gpu_engine_tests integration_tests kernel_suite tune_bench"
#   device:  run(command="bash bench/results/final-h200-2026-11-25/run.sh", carry=[".gpu-pack"], kind="nvidia-h200", timeout_s=590)
# Under $OUT: device.txt, kernel_tests.log, engine.log, integration.log, memcheck.txt, ks_{1,2}.{txt,json}, tune.txt.
source scripts/lib/gpu-common.sh
gpu_setup >/dev/null
export LD_LIBRARY_PATH=$R
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,clocks.max.mem --format=csv | tee -a "$out/device.txt"
step kernel tests
timeout 240 $B/gpu_kernel_tests --gtest_brief=1 2>&1 | tee "$out/kernel_tests.log" | tail -3
step engine tests
timeout 240 $B/gpu_engine_tests --gtest_brief=1 --gtest_filter='-StickyFault*:DeviceDrain*' 2>&1 \
  | grep -v '\[info\]' | tee "$out/engine.log" | tail -3
step integration on cuda
GPUSCAN_TEST_ENGINE=cuda timeout 200 $B/integration_tests --gtest_brief=1 2>&1 \
  | grep -v '\[info\]' | grep -v ' -> ' | tee "$out/integration.log" | tail -3
step memcheck scan2d
san=$(gpu_sanitizer)
timeout 200 $san --tool memcheck $B/gpu_engine_tests --gtest_brief=1 --gtest_filter='*Scan2D*' 2>&1 | tee "$out/memcheck.txt" | tail -2
for r in 1 2; do
  step kernel suite round $r
  timeout 240 $B/kernel_suite --ops scan,compact,scan2d --dtypes int32,float32,int64,float64 --sizes 2^16,2^24,2^28,2^30 \
    --json "$out/ks_$r.json" >"$out/ks_$r.txt" 2>&1
  echo "rc $?"; grep -E "2\^(16|28|30) " "$out/ks_$r.txt" | awk '{print $1, $2, $3, $4, $5, $7, $8}'
done
step tune_bench scan scan8 compact
timeout 240 $B/tune_bench scan scan8 compact >"$out/tune.txt" 2>&1; echo "rc $?"
grep -E " (268435456|1073741824) " "$out/tune.txt" | head -60
