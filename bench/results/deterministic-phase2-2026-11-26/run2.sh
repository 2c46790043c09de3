#!/usr/bin/env bash
# ON the GPU machine (carry .gpu-pack: tune_bench): the deterministic scan's phase-2 variants
# (v1: the carry's round trip beside the aggregates'; v2: v1 + both words loaded once before the
# next tile's phase 1), each checked bit for bit against the default, two rounds.
source scripts/gpu-common.sh >/dev/null
for r in 1 2; do
  step tune_bench det round $r
  timeout 250 $B/tune_bench det >"$out/tune_det_$r.txt" 2>&1; echo "rc $?"
  head -1 "$out/tune_det_$r.txt"; grep -E "MISMATCH" "$out/tune_det_$r.txt" | head -3
  grep -E " (16777216|268435456|1073741824|536870912) " "$out/tune_det_$r.txt" | grep -v "^copy"
done
