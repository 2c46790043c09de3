#!/usr/bin/env bash
# ON the GPU machine (carry .gpu-pack: kernel_suite_prof, as prof.sh): is phase 1's cost its
# global words or its time? Alternating ROUNDS rounds, no marks (GPUSCAN_EXP_PROF unset):
#   ceil 1 (a copy through the pipeline), 3 (phase 1 whole, the tile stored as loaded),
#   5 (phase 1's compute without its A publish or the super's total), 6 (a pause of
#   GPUSCAN_EXP_SLEEP ns in phase 1's place: 300, 600, 1200), 7 (ceil 3 without the super's
#   total: A published, nothing waits for it), and the kernel (ceil 0). VARIANTS picks.
source scripts/gpu-common.sh >/dev/null
export LD_LIBRARY_PATH=$R
unset GPUSCAN_EXP_PROF
for r in $(seq 1 ${ROUNDS:-2}); do
  for v in ${VARIANTS:-0 1 3 5 6:300 6:600 6:1200}; do
    export GPUSCAN_EXP_CEIL=${v%%:*}
    if [ "$v" != "${v#*:}" ]; then export GPUSCAN_EXP_SLEEP=${v#*:}; else unset GPUSCAN_EXP_SLEEP; fi
    step ceil $v round $r
    timeout 200 $B/kernel_suite_prof --ops scan --algorithms deterministic --dtypes float32,float64 \
      --sizes 2^26,2^28,2^30 >"$out/ks_${v/:/_}_$r.txt" 2>&1
    grep -E "^scan +determ" "$out/ks_${v/:/_}_$r.txt" | awk '{printf "%s %s %s | ", $3, $4, $7} NR%3==0 {print ""}'
  done
done
