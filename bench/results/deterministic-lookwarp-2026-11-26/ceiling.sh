#!/usr/bin/env bash
# ON the GPU machine (carry .gpu-pack: kernel_suite of lookwarp.diff's build): the deterministic
# scan without (0) and with (1) the look-back warp, each also with GPUSCAN_EXP_LW_NOWAIT=1 ("nw":
# phase 2 neither loads nor waits for its predecessors' aggregates and carry, wrong answers), two
# rounds. The output is in README.md.
rm -rf .gpu-bin .gpu-rt
source scripts/gpu-common.sh >/dev/null
export LD_LIBRARY_PATH=$R
for r in 1 2; do
  for v in 0 0nw 1nw; do
    unset GPUSCAN_EXP_LW_NOWAIT
    case $v in *nw) export GPUSCAN_EXP_LW_NOWAIT=1 ;; esac
    echo "== lw $v"
    GPUSCAN_EXP_LOOKWARP=${v:0:1} timeout 100 $B/kernel_suite --ops scan --algorithms deterministic \
      --dtypes float32,float64 --sizes 2^24,2^28 2>&1 | grep -E '^scan +determ' | awk '{print $3,$4,$5,$7,$8,$9}'
  done
done
