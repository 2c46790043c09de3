#!/usr/bin/env bash
# ON the GPU machine: the fused reduce by key (77 registers: 6 blocks a SM) compiled to fit 7
# (70 registers) or 8 (64, 4 bytes of spill) blocks, GPUSCAN_RBK_MIN_BLOCKS (an experiment
# switch of that build). Kernel tests under each, then three rounds alternating, CUB in the run.
source scripts/gpu-common.sh
for c in 0 7 8; do
  echo "kernel tests, cap $c: $(GPUSCAN_RBK_MIN_BLOCKS=$c timeout 200 $B/gpu_kernel_tests --gtest_brief=1 --gtest_filter='*ReduceByKey*' 2>&1 | grep -E 'PASSED|FAILED' | tail -2 | paste -sd' ')"
done
for round in 1 2 3; do
  for c in 0 7 8; do
    step "reduce by key, cap $c, round $round"
    GPUSCAN_RBK_MIN_BLOCKS=$c timeout 200 $B/kernel_suite --ops reduce_by_key --dtypes int32 --sizes 2^20,2^24,2^28,2^30 --reps 15 \
      --json "$out/ks_cap${c}_$round.json" >"$out/ks_cap${c}_$round.txt" 2>&1
    grep -E "^reduce_by_key" "$out/ks_cap${c}_$round.txt" | grep -v " cub " | awk '{print $2, $3, $4, $5, $7, $8, $9}' | paste -sd';'
  done
done
