#!/usr/bin/env bash
# Reduce by key uncapped against 8 blocks a SM, two rounds alternating, after the fix (kMinBlocks 0
# = no second __launch_bounds__ argument); and the look-back and segmented scan rows, to check the
# fix. Made run2/ (the figures tuning.cuh cites). The build read GPUSCAN_RBK_MIN_BLOCKS, an
# experiment switch since removed: pack that experiment build to run it again.
#   here:    scripts/gpu pack --targets "gpu_kernel_tests kernel_suite"
#   device:  run(command="bash bench/results/rbk-blocks-h100-2026-11-25/run.sh", carry=[".gpu-pack"], kind="nvidia-h100-x1", timeout_s=590)
# Under $OUT: device.txt, ks2_cap{0,8}_{1,2}.{txt,json}, ks_scan_seg.{txt,json}.
source scripts/lib/gpu-common.sh
gpu_setup
for c in 0 8; do
  echo "kernel tests, cap $c: $(GPUSCAN_RBK_MIN_BLOCKS=$c timeout 200 $B/gpu_kernel_tests --gtest_brief=1 --gtest_filter='*ReduceByKey*:*Segmented*' 2>&1 | grep -E 'PASSED|FAILED' | tail -2 | paste -sd' ')"
done
for round in 1 2; do
  for c in 0 8; do
    step "reduce by key, cap $c, round $round"
    GPUSCAN_RBK_MIN_BLOCKS=$c timeout 200 $B/kernel_suite --ops reduce_by_key --dtypes int32 --sizes 2^20,2^24,2^28,2^30 --reps 15 \
      --json "$out/ks2_cap${c}_$round.json" >"$out/ks2_cap${c}_$round.txt" 2>&1
    grep -E "^reduce_by_key" "$out/ks2_cap${c}_$round.txt" | grep -v " cub " | awk '{print $2, $3, $4, $5, $7, $8, $9}' | paste -sd';'
  done
done
step scan and segmented scan rows
timeout 300 $B/kernel_suite --ops scan,segmented_scan --algorithms decoupled_lookback,fused --dtypes int32,float32,int64,float64 \
  --sizes 2^24,2^28 --reps 15 --json "$out/ks_scan_seg.json" >"$out/ks_scan_seg.txt" 2>&1
grep -E "decoupled|fused" "$out/ks_scan_seg.txt" | awk '{print $1, $2, $3, $4, $5, $7, $8, $9}'
