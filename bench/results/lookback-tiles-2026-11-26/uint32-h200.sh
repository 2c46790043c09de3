#!/usr/bin/env bash
# ON the GPU machine (carry .gpu-pack: kernel_suite): does uint32 SUM (the same additions in two's
# complement) run the H200's 2^28 scan as int32 does (89.7%) or as float32 does (90.5%)?
source scripts/lib/gpu-common.sh && gpu_setup >/dev/null
export LD_LIBRARY_PATH=$R
for r in $(seq 1 ${ROUNDS:-3}); do
  step round $r
  timeout 150 $B/kernel_suite --ops scan --algorithms decoupled_lookback --dtypes int32,uint32,float32 \
    --sizes 2^26,2^28,2^30 >"$out/ks_$r.txt" 2>&1
  grep -E "^scan +decoupled" "$out/ks_$r.txt" | awk '{printf "%s %s %s %s | ", $3, $4, $5, $7} NR%3==0 {print ""}'
done
