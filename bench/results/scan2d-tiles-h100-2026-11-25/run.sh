#!/usr/bin/env bash
# ON the GPU machine (carry .gpu-pack: kernel_suite, gpu_engine_tests, gpu_kernel_tests): the 2-D
# scan by tiles in anti-diagonal order. The engine tests (all; Scan2D against the reference and
# the CPU engine), memcheck and racecheck on the Scan2D test, then two rounds of the kernel suite's
# scan2d rows against the device copy.
source scripts/gpu-common.sh >/dev/null
export LD_LIBRARY_PATH=$R
step engine tests
timeout 240 $B/gpu_engine_tests --gtest_brief=1 --gtest_filter='-StickyFault*:DeviceDrain*' 2>&1 | tee "$out/engine.log" | tail -4
san=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
for tool in memcheck racecheck; do
  step $tool
  timeout 200 $san --tool $tool $B/gpu_engine_tests --gtest_brief=1 --gtest_filter='*Scan2D*' 2>&1 | tee "$out/$tool.txt" | tail -3
done
for r in 1 2; do
  step round $r
  timeout 150 $B/kernel_suite --ops scan2d --dtypes float32,int32,float64 --sizes 2^20,2^24,2^26,2^28,2^30 \
    --json "$out/ks_scan2d_$r.json" >"$out/ks_scan2d_$r.txt" 2>&1
  grep -E "scan2d|copy" "$out/ks_scan2d_$r.txt" | awk '{print $1, $2, $3, $4, $5, $7}'
done
