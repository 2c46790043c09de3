#!/usr/bin/env bash
# ON the GPU machine (carry .gpu-pack: kernel_suite, gpu_engine_tests): tile shapes, switched by
# GPUSCAN_EXP_SCAN2D (scan2d_impl.cuh's experiment; float32 / float64 rows x columns [x column
# threads]): 0 128x128 / 64x128 (main), 1 64x128 / 64x64 (two blocks a SM), 2 64x128x256 /
# 64x128x256, 3 32x256 / 32x128 (1 KiB of a row, two blocks a SM). The Scan2D engine test under
# each, then three rounds alternating.
source scripts/gpu-common.sh >/dev/null
export LD_LIBRARY_PATH=$R
for v in 0 1 2 3; do
  step "Scan2D engine test, variant $v"
  GPUSCAN_EXP_SCAN2D=$v timeout 200 $B/gpu_engine_tests --gtest_brief=1 --gtest_filter='*Scan2D*' 2>&1 | tail -1
done
for r in 1 2 3; do
  for v in 0 1 2 3; do
    step "round $r variant $v"
    GPUSCAN_EXP_SCAN2D=$v timeout 150 $B/kernel_suite --ops scan2d --dtypes float32,float64 --sizes 2^24,2^26,2^28,2^30 \
      --json "$out/ks_v${v}_$r.json" >"$out/ks_v${v}_$r.txt" 2>&1
    grep -E "scan2d" "$out/ks_v${v}_$r.txt" | grep -v copy | awk '{print $3, $4, $5, $7}' | tr '\n' ' '; echo
  done
done
