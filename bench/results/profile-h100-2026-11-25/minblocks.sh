#!/usr/bin/env bash
# ON the GPU machine: the decoupled look-back scan compiled to fit 8 blocks a SM (4-byte: 64
# registers) or 4 (8-byte: 128), GPUSCAN_SCAN_MIN_BLOCKS (an experiment switch of that build),
# against the uncapped kernel (4-byte 66-70 registers: 7 blocks; 8-byte 153-156: 3 blocks).
# Kernel tests under the switch first; then three rounds alternating, CUB in the same run.
source scripts/gpu-common.sh
step kernel tests, capped
GPUSCAN_SCAN_MIN_BLOCKS=1 timeout 300 $B/gpu_kernel_tests --gtest_brief=1 --gtest_filter='*Scan*:-Canonical*' 2>&1 | tail -1
for round in 1 2 3; do
  for v in uncapped capped; do
    step "kernel suite, $v, round $round"
    env $( [ $v = capped ] && echo GPUSCAN_SCAN_MIN_BLOCKS=1 ) timeout 200 $B/kernel_suite --ops scan \
      --algorithms decoupled_lookback,cub --dtypes int32,float32,int64,float64 --sizes 2^16,2^20,2^24,2^28,2^30 --reps 15 \
      --json "$out/ks_${v}_$round.json" >"$out/ks_${v}_$round.txt" 2>&1
    grep -E "decoupled" "$out/ks_${v}_$round.txt" | grep -E "2\^(24|28|30)" | awk '{print $3, $4, $5, $7, $8, $9}' | paste -sd' ' | sed 's/ yes/;/g'
  done
done
