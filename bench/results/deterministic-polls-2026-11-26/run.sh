#!/usr/bin/env bash
# ON the GPU machine (carry .gpu-pack: kernel_suite of polls.diff, whose deterministic scan reads
# its polling delays from GPUSCAN_EXP_CARRY_NS (the carry's, 64 ns), GPUSCAN_EXP_AGG_NS (the
# aggregates', 32 ns) and GPUSCAN_EXP_AGG_SPINS (polls before the first sleep, 4)): each setting
# in turn, float32 deterministic at 2^24, 2^28, 2^30, ROUNDS rounds.
source scripts/gpu-common.sh >/dev/null
export LD_LIBRARY_PATH=$R
for r in $(seq 1 ${ROUNDS:-2}); do
  for v in 64:32:4 0:32:4 32:32:4 128:32:4 256:32:4 64:0:4 64:64:4 64:128:4 64:32:0 64:32:16; do
    IFS=: read -r c a sp <<<"$v"
    step "carry $c ns, aggregates $a ns after $sp polls, round $r"
    GPUSCAN_EXP_CARRY_NS=$c GPUSCAN_EXP_AGG_NS=$a GPUSCAN_EXP_AGG_SPINS=$sp timeout 100 $B/kernel_suite --ops scan \
      --algorithms deterministic --dtypes float32 --sizes 2^24,2^28,2^30 >"$out/p_${c}_${a}_${sp}_$r.txt" 2>&1
    grep -E "^scan +determ" "$out/p_${c}_${a}_${sp}_$r.txt" | awk '{printf "%s %s %s | ", $4, $7, $8} END {print ""}'
  done
done
