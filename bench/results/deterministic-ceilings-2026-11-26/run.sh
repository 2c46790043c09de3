#!/usr/bin/env bash
# ON the GPU machine (carry .gpu-pack: kernel_suite_main = main, kernel_suite_ceil = main with
# ceiling.diff): where the deterministic scan's time goes, alternating ROUNDS rounds:
#   main; ceil1 = GPUSCAN_EXP_CEIL=1: the persistent pipeline as a copy (cp.async in, barrier,
#   st.global out; no phase 1 or 2, no state update); ceil2 = GPUSCAN_EXP_CEIL=2: everything but
#   the stores of the scanned tiles; ceil3 = 3: phase 1 whole, then the tile stored as loaded;
#   ceil4 = 4: phase 2 without its fetch (no carry, no aggregates). Wrong answers in all
#   ceilings (verified "no"); none runs the last block's state update.
source scripts/gpu-common.sh >/dev/null
export LD_LIBRARY_PATH=$R
for r in $(seq 1 ${ROUNDS:-2}); do
  for v in main ceil1 ceil3 ceil4; do
    bin=$B/kernel_suite_ceil; unset GPUSCAN_EXP_CEIL
    case $v in main) bin=$B/kernel_suite_main;; ceil1) export GPUSCAN_EXP_CEIL=1;; ceil2) export GPUSCAN_EXP_CEIL=2;; ceil3) export GPUSCAN_EXP_CEIL=3;; ceil4) export GPUSCAN_EXP_CEIL=4;; esac
    step $v round $r
    timeout 200 $bin --ops scan --algorithms decoupled_lookback,deterministic --dtypes float32,float64 \
      --sizes ${SIZES:-2^24,2^26,2^28,2^30} >"$out/ks_${v}_$r.txt" 2>&1
    echo "rc $?"; grep -E "^scan +determ" "$out/ks_${v}_$r.txt" | awk '{printf "%s %s %s %s %s | ", $3, $4, $7, $8, $9} NR%4==0 {print ""}'
  done
done
unset GPUSCAN_EXP_CEIL
grep -hE "^scan +decoupled" "$out"/ks_main_*.txt | awk '$4=="2^28" || $4=="2^30" {print "look-back", $3, $4, $7}'
