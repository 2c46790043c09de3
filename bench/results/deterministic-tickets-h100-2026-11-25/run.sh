#!/usr/bin/env bash
# ON the GPU machine (device `run`, repo root, carry .gpu-pack): the deterministic scan's one
# pass without a global round trip a tile on the block's path (tickets drawn an iteration ahead,
# finished tiles counted once a block: GPUSCAN_CANON_VARIANT=1) and with P[j-1] by one warp
# (=2), against the kernel as it was (=0); each with and without the predecessors' words loaded
# early (GPUSCAN_CANON_PREFETCH). Experiment switches read by the dispatch.
# Correctness first (bit for bit against the tree's reference for every variant, also on 3
# persistent blocks; memcheck, racecheck, engine and RPC determinism tests), then the suite.
#   ROUNDS (default 1), COMBOS (default "0:0 0:1 1:0 1:1 2:0 2:1", variant:prefetch)
source scripts/gpu-common.sh
san=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
COMBOS=${COMBOS:-"0:0 0:1 1:0 1:1 2:0 2:1"}
step kernel tests: canonical scan, every variant
for c in $COMBOS; do
  GPUSCAN_CANON_VARIANT=${c%:*} GPUSCAN_CANON_PREFETCH=${c#*:} timeout 120 $B/gpu_kernel_tests --gtest_brief=1 \
    --gtest_filter='CanonicalKernel*' >"$out/kernel_${c/:/_}.log" 2>&1
  echo "variant:prefetch $c: $(tail -1 "$out/kernel_${c/:/_}.log")"; grep -m3 -B2 -A6 "Failure" "$out/kernel_${c/:/_}.log"
done
step memcheck, racecheck: default variant
timeout 150 "$san" --tool memcheck --error-exitcode 9 $B/gpu_kernel_tests --gtest_brief=1 \
  --gtest_filter='CanonicalKernelTest.Float32Sum:CanonicalKernelTest.Float64Product:CanonicalKernelTest.StateOnly*:CanonicalKernelTest.Unaligned*' \
  >"$out/memcheck.txt" 2>&1; echo "memcheck exit $?"; tail -2 "$out/memcheck.txt"
timeout 150 "$san" --tool racecheck --error-exitcode 9 $B/gpu_kernel_tests --gtest_brief=1 \
  --gtest_filter='CanonicalKernelTest.StateOnly*:CanonicalKernelTest.Unaligned*' >"$out/racecheck.txt" 2>&1
echo "racecheck exit $?"; tail -2 "$out/racecheck.txt"
step engine and RPC tests: default variant
LD_LIBRARY_PATH=$R timeout 200 $B/gpu_engine_tests --gtest_brief=1 \
  --gtest_filter='CudaDeterministic*:*Segmented*:*ReduceEveryDType*' 2>&1 | tee "$out/engine.log" | tail -2
GPUSCAN_TEST_ENGINE=cuda LD_LIBRARY_PATH=$R timeout 200 $B/integration_tests --gtest_brief=1 \
  --gtest_filter='*Deterministic*:*Segmented*' 2>&1 | grep -v '\[info\]' | grep -v ' -> ' | tee "$out/integration.log" | tail -2
for round in $(seq 1 "${ROUNDS:-1}"); do
  for c in $COMBOS; do
    step "kernel suite, variant:prefetch $c, round $round"
    GPUSCAN_CANON_VARIANT=${c%:*} GPUSCAN_CANON_PREFETCH=${c#*:} timeout 200 $B/kernel_suite --ops scan \
      --algorithms deterministic,cub --dtypes float32,float64 --sizes ${SIZES:-2^16,2^20,2^24,2^28,2^30} --reps 15 \
      --json "$out/ks_${c/:/_}_$round.json" >"$out/ks_${c/:/_}_$round.txt" 2>&1
    grep -E "deterministic" "$out/ks_${c/:/_}_$round.txt" | awk '{print $3, $4, $5, $8, $9, $10}'
  done
done
