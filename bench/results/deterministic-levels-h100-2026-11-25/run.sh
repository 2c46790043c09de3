#!/usr/bin/env bash
# ON the GPU machine (device `run`, repo root, carry .gpu-pack from scripts/gpu-check.sh):
# the one-pass deterministic scan reading y_5 level words (39 words in two round trips a tile)
# instead of every earlier aggregate of its super. scripts/gpu-deterministic.sh does the
# correctness (bit for bit against the tree's reference, memcheck, racecheck, engine and RPC
# tests) and one kernel-suite round; a second round follows here.
bash scripts/gpu-deterministic.sh
source scripts/gpu-common.sh >/dev/null
step kernel suite, second round
timeout 200 $B/kernel_suite --ops scan --algorithms deterministic,decoupled_lookback,cub --dtypes float32,float64 \
  --sizes 2^10,2^16,2^20,2^24,2^28,2^30 --json "$out/ks_det2.json" >"$out/ks_det2.txt" 2>&1
grep -v '^copy' "$out/ks_det2.txt" | head -40
