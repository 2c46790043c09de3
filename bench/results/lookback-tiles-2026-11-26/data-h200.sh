#!/usr/bin/env bash
# ON the GPU machine (carry .gpu-pack: kernel_suite with the experiment switch GPUSCAN_FILL, since
# removed): does the H200's int32-float32 gap at 2^28 follow the data's bits rather than the code?
# 0 = the suite's data (int32 in [-500, 500), float32 small integers), f = every bit random
# (int32 any value, float32 uniform in [-0.5, 0.5)), z = int32 0 or 1 (float32 as 0).
# nvidia-smi samples power and clocks during each run.
source scripts/lib/gpu-common.sh && gpu_setup >/dev/null
export LD_LIBRARY_PATH=$R
for r in $(seq 1 ${ROUNDS:-3}); do
  for f in ${FILLS:-0 f z}; do
    step fill $f round $r
    nvidia-smi --query-gpu=timestamp,power.draw,clocks.sm,clocks.mem,clocks_throttle_reasons.active --format=csv -lms 50 \
      >"$out/smi_${f}_$r.csv" 2>&1 &
    smi=$!
    GPUSCAN_FILL=$f timeout 150 $B/kernel_suite --ops scan --algorithms decoupled_lookback --dtypes int32,float32 \
      --sizes 2^28,2^30 --reps 50 >"$out/ks_${f}_$r.txt" 2>&1
    kill $smi
    grep -E "^(copy|scan) +(scan|decoupled)" "$out/ks_${f}_$r.txt" | awk '{printf "%s %s %s %s %s | ", $1, $3, $4, $5, $7} NR%2==0 {print ""}'
    awk -F', ' 'NR>1 && $2+0>300 {p+=$2; c+=$3; n++} END {if (n) printf "busy samples %d: mean %.0f W, SM %.0f MHz\n", n, p/n, c/n}' "$out/smi_${f}_$r.csv"
  done
done
