#!/usr/bin/env bash
# ON the GPU machine (carry .gpu-pack: kernel_suite with the experiment switches GPUSCAN_SCAN_POLICY
# and GPUSCAN_L2HINT, since removed): L2 evict-first hints on the look-back scan's bulk copies.
# Hint 0 = none (the kernel as committed), 1 = the tile's bulk store, 2 = its bulk load and store,
# 3 = the load. Policies as shapes-h200.sh (0 = the device's own, c = 128x44 for 9 blocks a SM).
source scripts/lib/gpu-common.sh && gpu_setup >/dev/null
export LD_LIBRARY_PATH=$R
for r in $(seq 1 ${ROUNDS:-2}); do
  for p in ${POLICIES:-0 c}; do
    for h in ${HINTS:-0 1 2 3}; do
      step policy $p hint $h round $r
      GPUSCAN_L2HINT=$h GPUSCAN_SCAN_POLICY=$p timeout 150 $B/kernel_suite --ops scan --algorithms decoupled_lookback \
        --dtypes ${DTYPES:-int32,float32} --sizes 2^26,2^28,2^30 >"$out/ks_${p}_h${h}_$r.txt" 2>&1
      grep -E "^scan +decoupled" "$out/ks_${p}_h${h}_$r.txt" | awk '{printf "%s %s %s %s | ", $3, $4, $7, $8} NR%3==0 {print ""}'
    done
  done
done
