#!/usr/bin/env bash
# ON the GPU machine (carry .gpu-pack: kernel_suite of watchdog/run.sh's build): many more
# launches of variants 1 and 0 with the bounded polls. A trap prints the tile and the word.
source scripts/gpu-common.sh >/dev/null
for v in 1 0; do
  for cell in "2^28 2000" "2^30 500" "2^28 2000" "2^26 4000"; do
    set -- $cell
    step "variant $v float32 $1 x $2"
    GPUSCAN_EXP_SCAN2D=$v timeout 60 $B/kernel_suite --ops scan2d --dtypes float32 --sizes $1 --reps $2 \
      >"$out/long_v${v}_$1_$2.txt" 2>&1
    echo "rc $?"; grep -E "tile_wavefront|gpuscan scan2d|rror" "$out/long_v${v}_$1_$2.txt" | sort | uniq -c | sort -rn | head -8
  done
done
