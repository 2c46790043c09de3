#!/usr/bin/env bash
# ON the GPU machine (carry .gpu-pack: kernel_suite of this change): the deterministic and look-back
# float scans at every size of the suite (2^10..2^30), CUB and copy in the same run, ROUNDS rounds.
source scripts/lib/gpu-common.sh && gpu_setup >/dev/null
export LD_LIBRARY_PATH=$R
for r in $(seq 1 ${ROUNDS:-2}); do
  step round $r
  timeout 250 $B/kernel_suite --ops scan --algorithms decoupled_lookback,deterministic --dtypes float32,float64 \
    --json "$out/sizes_$r.json" >"$out/sizes_$r.txt" 2>&1
  echo "rc $?"; grep -E "^scan +(determ|decoupled)" "$out/sizes_$r.txt" | awk '{printf "%s %s %s %s %s | ", $2, $3, $4, $7, $8} NR%4==0 {print ""}'
done
