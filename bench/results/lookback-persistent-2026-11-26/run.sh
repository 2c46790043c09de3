#!/usr/bin/env bash
# ON the GPU machine (carry .gpu-pack: tune_bench): the look-back scan with persistent blocks
# (tickets drawn a tile ahead) against the default (a block a tile), CUB and the copy in the same
# run, every output checked against CUB's; scan (int32, float32) and scan8 (int64, float64).
source scripts/gpu-common.sh >/dev/null
for r in 1 2; do
  step tune_bench scan scan8 round $r
  timeout 280 $B/tune_bench scan scan8 >"$out/tune_$r.txt" 2>&1; echo "rc $?"
  grep -E "MISMATCH" "$out/tune_$r.txt" | head -3
  grep -E "^== | (65536|16777216|268435456|1073741824|536870912) " "$out/tune_$r.txt" | grep -E "==|cub|default|persistent"
done
