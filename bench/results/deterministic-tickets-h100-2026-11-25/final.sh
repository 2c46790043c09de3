#!/usr/bin/env bash
# ON the GPU machine (device `run`, repo root, carry .gpu-pack from scripts/gpu-check.sh): the
# kept kernel (no switches): canonical and segmented kernel tests, memcheck, racecheck, engine
# and RPC determinism tests, then the kernel suite's deterministic rows beside CUB, two rounds.
source scripts/gpu-common.sh
san=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
step kernel tests: canonical and segmented scans
timeout 200 $B/gpu_kernel_tests --gtest_brief=1 --gtest_filter='Canonical*:*Segmented*' >"$out/kernel.log" 2>&1
tail -1 "$out/kernel.log"; grep -m3 -B2 -A6 "Failure" "$out/kernel.log"
step memcheck, racecheck
timeout 150 "$san" --tool memcheck --error-exitcode 9 $B/gpu_kernel_tests --gtest_brief=1 \
  --gtest_filter='CanonicalKernelTest.Float32Sum:CanonicalKernelTest.Float64Product:CanonicalKernelTest.StateOnly*:CanonicalKernelTest.Unaligned*' \
  >"$out/memcheck.txt" 2>&1; echo "memcheck exit $?"; tail -2 "$out/memcheck.txt"
timeout 150 "$san" --tool racecheck --error-exitcode 9 $B/gpu_kernel_tests --gtest_brief=1 \
  --gtest_filter='CanonicalKernelTest.StateOnly*:CanonicalKernelTest.Unaligned*' >"$out/racecheck.txt" 2>&1
echo "racecheck exit $?"; tail -2 "$out/racecheck.txt"
step engine and RPC tests
LD_LIBRARY_PATH=$R timeout 200 $B/gpu_engine_tests --gtest_brief=1 \
  --gtest_filter='CudaDeterministic*:*Segmented*:*ReduceEveryDType*' 2>&1 | tee "$out/engine.log" | tail -2
GPUSCAN_TEST_ENGINE=cuda LD_LIBRARY_PATH=$R timeout 200 $B/integration_tests --gtest_brief=1 \
  --gtest_filter='*Deterministic*:*Segmented*' 2>&1 | grep -v '\[info\]' | grep -v ' -> ' | tee "$out/integration.log" | tail -2
for round in 1 2; do
  step "kernel suite, round $round"
  timeout 200 $B/kernel_suite --ops scan --algorithms deterministic,cub --dtypes float32,float64 \
    --sizes 2^12,2^16,2^20,2^22,2^24,2^26,2^28,2^30 --reps 15 --json "$out/ks_$round.json" >"$out/ks_$round.txt" 2>&1
  grep -E "deterministic" "$out/ks_$round.txt" | awk '{print $3, $4, $5, $7, $8, $9}'
done
