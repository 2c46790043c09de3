#!/usr/bin/env bash
# ON the GPU machine (carry .gpu-pack: kernel_suite of bulk-sleep.diff's build): a pause of
# GPUSCAN_EXP_SLEEP_NS after each tile's store (before the next tile's load), with and without
# bulk copies, two rounds. The output is in README.md.
rm -rf .gpu-bin .gpu-rt
source scripts/gpu-common.sh >/dev/null
export LD_LIBRARY_PATH=$R
for r in 1 2; do
  for v in 0:0 0:250 0:500 0:1000 0:2000 1:0 1:500 1:1000; do
    b=${v%:*} sl=${v#*:}
    echo "== bulk $b sleep $sl"
    GPUSCAN_EXP_BULK=$b GPUSCAN_EXP_SLEEP_NS=$sl timeout 100 $B/kernel_suite --ops scan --algorithms deterministic \
      --dtypes float32 --sizes 2^26,2^28 2>&1 | grep -E '^scan +determ' | awk '{printf "%s %s %s %s %s | ", $3,$4,$5,$7,$8} END {print ""}'
  done
done
