#!/usr/bin/env bash
# ON the GPU machine (carry .gpu-pack: tune_bench, the committed build): the deterministic scan's
# tiles a block (2 or 3) and persistent blocks a SM, now that float32 tiles are 16 KiB of vectors
# (2 tiles: 5 blocks a SM by registers; 3 tiles: 4 by shared memory). Every variant is compared
# bit for bit with the default's output; CUB and a copy in the same run. Two rounds.
source scripts/gpu-common.sh >/dev/null
export LD_LIBRARY_PATH=$R
for r in 1 2; do
  step round $r
  timeout 250 $B/tune_bench det >"$out/det_$r.txt" 2>&1
  echo "rc $?"; grep -E "2\^28|n=268435456|268435456" "$out/det_$r.txt" | head -20
done
