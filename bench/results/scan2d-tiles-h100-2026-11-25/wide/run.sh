#!/usr/bin/env bash
# ON the GPU machine (carry .gpu-pack: kernel_suite, gpu_engine_tests): tiles whose rows are
# 512 bytes (128 x 128 float32, 128 x 64 float64) against 1 KiB (64 x 256, 64 x 128), switched by
# GPUSCAN_EXP_SCAN2D_WIDE (an experiment in scan2d_impl.cuh, since removed); the Scan2D engine
# test under both, then three rounds alternating. The "main" kernel of this run had a slower
# full-tile load loop than 384245c's (one loop over all elements instead of rows a step): its
# float32 rows (73.7-74.1%) are below 384245c's 77%.
source scripts/gpu-common.sh >/dev/null
export LD_LIBRARY_PATH=$R
for w in "" 1; do
  step "Scan2D engine test, wide=${w:-no}"
  GPUSCAN_EXP_SCAN2D_WIDE=$w timeout 200 $B/gpu_engine_tests --gtest_brief=1 --gtest_filter='*Scan2D*' 2>&1 | tail -2
done
unset GPUSCAN_EXP_SCAN2D_WIDE
for r in 1 2 3; do
  for w in main wide; do
    step "round $r $w"
    if [ $w = wide ]; then export GPUSCAN_EXP_SCAN2D_WIDE=1; else unset GPUSCAN_EXP_SCAN2D_WIDE; fi
    timeout 150 $B/kernel_suite --ops scan2d --dtypes float32,float64 --sizes 2^24,2^26,2^28,2^30 \
      --json "$out/ks_${w}_$r.json" >"$out/ks_${w}_$r.txt" 2>&1
    grep -E "scan2d" "$out/ks_${w}_$r.txt" | grep -v copy | awk '{print $1, $2, $3, $4, $5, $7}'
  done
done
