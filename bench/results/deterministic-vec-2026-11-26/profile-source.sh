#!/usr/bin/env bash
# ON the GPU machine (carry .gpu-pack: kernel_suite, the committed build): where the
# deterministic float32 scan's warps stall, instruction by instruction (ncu's source page with
# warp-state samples, SASS with line info), one launch at 2^28.
source scripts/gpu-common.sh >/dev/null
export LD_LIBRARY_PATH=$R
timeout 300 ncu --section WarpStateStats --section SourceCounters -k regex:OnePassKernel -s 3 -c 1 \
  --page source --print-source sass,cuda --csv $B/kernel_suite --ops scan --algorithms deterministic \
  --dtypes float32 --sizes 2^28 --reps 3 --warmup 1 >"$out/source.csv" 2>"$out/source.err"
echo "rc $?"; wc -l "$out/source.csv"; head -3 "$out/source.csv" | cut -c1-400
