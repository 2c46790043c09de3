#!/usr/bin/env bash
# ON the GPU machine (device `run`, repo root, carry .gpu-pack): the one-pass deterministic scan
# with persistent blocks that start the next tile's loads before scanning the current one.
# Correctness first (bit for bit against the tree's reference, memcheck, racecheck, engine and
# RPC tests), then the kernel suite at the occupancy's blocks per SM and capped lower
# (GPUSCAN_CANON_BLOCKS_PER_SM, an experiment switch).
source scripts/gpu-common.sh
san=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
step kernel tests: canonical scan
timeout 120 $B/gpu_kernel_tests --gtest_brief=1 --gtest_filter='CanonicalKernel*' 2>&1 | tee "$out/kernel.log" | tail -4
GPUSCAN_CANON_NO_PREFETCH=1 timeout 120 $B/gpu_kernel_tests --gtest_brief=1 --gtest_filter='CanonicalKernel*' 2>&1 | tail -1 | sed "s/^/no prefetch: /"
step memcheck
timeout 150 "$san" --tool memcheck --error-exitcode 9 $B/gpu_kernel_tests --gtest_brief=1 \
  --gtest_filter='CanonicalKernelTest.Float32Sum:CanonicalKernelTest.Float64Product:CanonicalKernelTest.StateOnly*:CanonicalKernelTest.Unaligned*' \
  >"$out/memcheck.txt" 2>&1; echo "memcheck exit $?"; tail -3 "$out/memcheck.txt"
step racecheck
timeout 150 "$san" --tool racecheck --error-exitcode 9 $B/gpu_kernel_tests --gtest_brief=1 \
  --gtest_filter='CanonicalKernelTest.StateOnly*:CanonicalKernelTest.Unaligned*' >"$out/racecheck.txt" 2>&1
echo "racecheck exit $?"; tail -3 "$out/racecheck.txt"
step engine and RPC tests
LD_LIBRARY_PATH=$R timeout 200 $B/gpu_engine_tests --gtest_brief=1 \
  --gtest_filter='CudaDeterministic*:*Segmented*:*ReduceEveryDType*' 2>&1 | tee "$out/engine.log" | tail -3
GPUSCAN_TEST_ENGINE=cuda LD_LIBRARY_PATH=$R timeout 200 $B/integration_tests --gtest_brief=1 \
  --gtest_filter='*Deterministic*:*Segmented*' 2>&1 | grep -v '\[info\]' | grep -v ' -> ' | tee "$out/integration.log" | tail -3
for round in 1 2; do
  for v in prefetch no_prefetch; do
    step "kernel suite, $v, round $round"
    env $( [ $v = no_prefetch ] && echo GPUSCAN_CANON_NO_PREFETCH=1 ) timeout 200 $B/kernel_suite --ops scan \
      --algorithms deterministic,cub --dtypes float32,float64 --sizes 2^12,2^16,2^20,2^24,2^28,2^30 --reps 15 \
      --json "$out/ks_${v}_$round.json" >"$out/ks_${v}_$round.txt" 2>&1
    grep -E "deterministic|cub .*2\^2[48]" "$out/ks_${v}_$round.txt"
  done
done
