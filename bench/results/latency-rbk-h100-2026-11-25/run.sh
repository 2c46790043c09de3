#!/usr/bin/env bash
# Reduce by key with heads counted, and the deterministic scan's small calls: the kernel and
# engine tests, memcheck on the deterministic and reduce-by-key kernel tests, then two rounds of
# small-size scans (deterministic, look-back, CUB) and reduce by key beside CUB.
#   here:    scripts/gpu pack --targets "gpu_kernel_tests gpu_engine_tests kernel_suite"
#   device:  run(command="bash bench/results/latency-rbk-h100-2026-11-25/run.sh", carry=[".gpu-pack"], kind="nvidia-h100-x1", timeout_s=590)
# Under $OUT: device.txt, kernel.log, engine.log, memcheck.txt, ks_small_{1,2}.*, ks_rbk_{1,2}.*.
source scripts/lib/gpu-common.sh
gpu_setup >/dev/null
step kernel tests
timeout 240 $B/gpu_kernel_tests --gtest_brief=1 2>&1 | tee "$out/kernel.log" | tail -4
step engine tests
timeout 200 $B/gpu_engine_tests --gtest_brief=1 --gtest_filter='-StickyFault*:DeviceDrain*' 2>&1 | tee "$out/engine.log" | tail -4
step memcheck
san=$(gpu_sanitizer)
timeout 240 $san --tool memcheck $B/gpu_kernel_tests --gtest_brief=1 \
  --gtest_filter='CanonicalKernelTest.Float32Sum:CanonicalKernelTest.StateOnly*:ReduceByKeyTest.*' 2>&1 | tee "$out/memcheck.txt" | tail -3
for r in 1 2; do
  step round $r
  timeout 120 $B/kernel_suite --ops scan --algorithms decoupled_lookback,deterministic,cub --dtypes int32,float32,float64 \
    --sizes 2^12,2^14,2^16,2^18,2^20 --reps 25 --json "$out/ks_small_$r.json" >"$out/ks_small_$r.txt" 2>&1
  grep -E "2\^16" "$out/ks_small_$r.txt" | awk '{print $1, $2, $3, $4, $5, $7, $8}'
  timeout 200 $B/kernel_suite --ops reduce_by_key --algorithms fused,cub --dtypes int32 \
    --sizes 2^16,2^20,2^24,2^28,2^30 --reps 15 --json "$out/ks_rbk_$r.json" >"$out/ks_rbk_$r.txt" 2>&1
  grep -E "fused" "$out/ks_rbk_$r.txt" | awk '{print $1, $2, $3, $4, $5, $7, $8, $9}'
done
