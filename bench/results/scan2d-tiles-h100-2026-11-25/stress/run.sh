#!/usr/bin/env bash
# ON the GPU machine (carry .gpu-pack: kernel_suite, gpu_engine_tests): variant 1 of shapes.sh hung
# once in 90 launches of 16384^2 float32. Polls now back off (64 ns after 4 tries). Many launches
# of each shape under a timeout: a hang shows as rc 124. GPUSCAN_EXP_SCAN2D as in shapes.sh.
source scripts/gpu-common.sh >/dev/null
export LD_LIBRARY_PATH=$R
for v in 0 1; do
  for cell in "float32 2^24 1500" "float32 2^28 600" "float64 2^28 300" "float32 2^30 120"; do
    set -- $cell
    step "variant $v $1 $2 x $3"
    GPUSCAN_EXP_SCAN2D=$v timeout 100 $B/kernel_suite --ops scan2d --dtypes $1 --sizes $2 --reps $3 \
      >"$out/stress_v${v}_$1_$2.txt" 2>&1
    echo "rc $?"; grep tile_wavefront "$out/stress_v${v}_$1_$2.txt" | awk '{print $3, $4, $5, $7, $8, $9}'
  done
done
step "Scan2D engine test, variants 0 and 1"
for v in 0 1; do GPUSCAN_EXP_SCAN2D=$v timeout 200 $B/gpu_engine_tests --gtest_brief=1 --gtest_filter='*Scan2D*' 2>&1 | tail -1; done
