#!/usr/bin/env bash
# ON the GPU machine (carry .gpu-pack: kernel_suite): the polls now give up after 2^23 tries with a
# message naming the tile and the word, then trap. Does variant 1's hang end at a poll?
source scripts/gpu-common.sh >/dev/null
for v in 1 0; do
  step "variant $v float32 2^28 x 400"
  GPUSCAN_EXP_SCAN2D=$v timeout 80 $B/kernel_suite --ops scan2d --dtypes float32 --sizes 2^28 --reps 400 \
    >"$out/watchdog_v$v.txt" 2>&1
  echo "rc $?"; grep -E "tile_wavefront|gpuscan scan2d|error|Error" "$out/watchdog_v$v.txt" | sort | uniq -c | sort -rn | head -12
done
