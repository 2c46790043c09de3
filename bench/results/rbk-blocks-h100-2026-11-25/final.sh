#!/usr/bin/env bash
# ON the GPU machine (carry .gpu-pack from scripts/gpu-check.sh): the whole GPU suite on the kept
# code, then the reduce by key and scan rows (8-byte look-back at 4 blocks a SM, reduce by key
# at 8) beside CUB.
bash scripts/gpu-suite.sh 2>&1 | grep -E "^=== |PASSED|FAILED|ERROR SUMMARY|tests ran|%ceil|^ +1 |wall |deterministic +float32 +2\^28" | grep -v "\[info\]"
source scripts/gpu-common.sh >/dev/null
step reduce by key and scan rows
timeout 300 $B/kernel_suite --ops scan,reduce_by_key --algorithms decoupled_lookback,fused,deterministic --dtypes int32,float32,int64,float64 \
  --sizes 2^24,2^28,2^30 --reps 15 >"$out/ks_final.txt" 2>&1
grep -E "decoupled|fused|deterministic" "$out/ks_final.txt" | awk '{print $1, $2, $3, $4, $5, $7, $8}'
