#!/usr/bin/env bash
# ON the GPU machine: float32 with two tiles a block (6 blocks a SM) against three (4 a SM) on
# the kept kernel (GPUSCAN_CANON_STAGES, an experiment switch of that build), two rounds; and
# the RPC tests on the cuda engine (integration_tests, the whole binary).
source scripts/gpu-common.sh
step kernel tests, two tiles
GPUSCAN_CANON_STAGES=2 timeout 120 $B/gpu_kernel_tests --gtest_brief=1 --gtest_filter='Canonical*' 2>&1 | tail -1
for round in 1 2; do
  for v in three two; do
    step "kernel suite float32, $v tiles, round $round"
    env $( [ $v = two ] && echo GPUSCAN_CANON_STAGES=2 ) timeout 200 $B/kernel_suite --ops scan \
      --algorithms deterministic,cub --dtypes float32 --sizes 2^16,2^20,2^22,2^24,2^26,2^28,2^30 --reps 15 \
      --json "$out/ks_${v}_$round.json" >"$out/ks_${v}_$round.txt" 2>&1
    grep -E "deterministic" "$out/ks_${v}_$round.txt" | awk '{print $3, $4, $5, $7, $8, $9}'
  done
done
step RPC tests on the cuda engine
GPUSCAN_TEST_ENGINE=cuda LD_LIBRARY_PATH=$R timeout 400 $B/integration_tests --gtest_brief=1 2>&1 \
  | grep -v '\[info\]' | grep -v ' -> ' >"$out/integration_cuda.log"; tail -4 "$out/integration_cuda.log"
