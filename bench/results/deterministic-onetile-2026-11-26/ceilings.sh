#!/usr/bin/env bash
# ON the GPU machine (carry .gpu-pack: kernel_suite of ceilings.diff's build): the day's ceilings
# again without their confound (a launch's last block walked the carry chain one super at a time
# when phase 2 had published no carries): GPUSCAN_EXP_P2=1 (phase 2 fetches nothing) and 3 (the
# carry only), both without the state update; the block-a-tile kernel with and without its count
# a tile (GPUSCAN_EXP_SKIP_STATE; the suite's calls are fresh arrays, so its output stays right).
rm -rf .gpu-bin .gpu-rt
source scripts/gpu-common.sh >/dev/null
export LD_LIBRARY_PATH=$R
for r in 1 2; do
  for v in base p2_1 p2_3 onetile onetile_nocount; do
    unset GPUSCAN_EXP_P2 GPUSCAN_EXP_ONETILE GPUSCAN_EXP_SKIP_STATE
    case $v in
      p2_*) export GPUSCAN_EXP_P2=${v#p2_} ;;
      onetile) export GPUSCAN_EXP_ONETILE=1 ;;
      onetile_nocount) export GPUSCAN_EXP_ONETILE=1 GPUSCAN_EXP_SKIP_STATE=1 ;;
    esac
    echo "== $v round $r"
    timeout 100 $B/kernel_suite --ops scan --algorithms deterministic --dtypes float32,float64 \
      --sizes 2^24,2^28,2^30 2>&1 | grep -E '^scan +determ' | awk '{printf "%s %s %s %s %s %s | ", $3,$4,$5,$7,$8,$9} END {print ""}'
  done
done
