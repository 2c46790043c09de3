#!/usr/bin/env bash
# ON the GPU machine (carry .gpu-pack from scripts/gpu-check.sh): the column half's barrier now
# reconverges its warps and is the unaligned form. First the shape that hung (variant 1, 64 x 128
# float32, two blocks a SM) and the kept shapes (variant 0) under many launches, then the whole
# GPU suite on the kept code.
source scripts/gpu-common.sh >/dev/null
export LD_LIBRARY_PATH=$R
for v in 1 0; do
  for cell in "float32 2^28 600" "float32 2^30 120" "float64 2^28 200"; do
    set -- $cell
    step "variant $v $1 $2 x $3"
    GPUSCAN_EXP_SCAN2D=$v timeout 60 $B/kernel_suite --ops scan2d --dtypes $1 --sizes $2 --reps $3 \
      >"$out/stress_v${v}_$1_$2.txt" 2>&1
    echo "rc $?"; grep tile_wavefront "$out/stress_v${v}_$1_$2.txt" | awk '{print $3, $4, $5, $7, $8, $9}'
  done
done
unset LD_LIBRARY_PATH
bash scripts/gpu-suite.sh 2>&1 | grep -E "^=== |PASSED|FAILED|ERROR SUMMARY|tests ran|%ceil|^ +1 |wall " | grep -v "\[info\]"
