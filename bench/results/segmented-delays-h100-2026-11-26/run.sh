#!/usr/bin/env bash
# ON the GPU machine (carry .gpu-pack: kernel_suite built with the experiment switch
# GPUSCAN_SEG_DELAYS=first,poll): the fused segmented scan's look-back sleeps, now that its tiles
# are prefetched before the ticket; default (2400,600) and others, alternating, two rounds.
source scripts/gpu-common.sh >/dev/null
export LD_LIBRARY_PATH=$R
for r in 1 2; do
  for d in default 3200,800 3200,1600 4000,1000 1600,400 2400,1200; do
    step delays $d round $r
    if [ $d = default ]; then unset GPUSCAN_SEG_DELAYS; else export GPUSCAN_SEG_DELAYS=$d; fi
    timeout 100 $B/kernel_suite --ops segmented_scan --dtypes int32 --sizes 2^24,2^26,2^28,2^30 >"$out/ks_${d/,/_}_$r.txt" 2>&1
    grep -E "^segmented_scan " "$out/ks_${d/,/_}_$r.txt" | grep -v " cub " | awk '{printf "%s %s %s %s | ", $4, $5, $7, $8} END {print ""}'
  done
done
unset GPUSCAN_SEG_DELAYS
