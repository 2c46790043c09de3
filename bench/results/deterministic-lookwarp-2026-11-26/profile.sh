#!/usr/bin/env bash
# ON the GPU machine (carry .gpu-pack: kernel_suite of the experiment build): ncu of one
# deterministic float32 scan at 2^26 without and with the look-back warp (and with it but no
# waits, GPUSCAN_EXP_LW_NOWAIT: wrong answers): speed of light, scheduler and warp-state sections.
rm -rf .gpu-bin .gpu-rt
source scripts/gpu-common.sh >/dev/null
export LD_LIBRARY_PATH=$R
for v in 0 1 nw; do
  lw=$v; unset GPUSCAN_EXP_LW_NOWAIT
  [ $v = nw ] && { lw=1; export GPUSCAN_EXP_LW_NOWAIT=1; }
  step ncu look-back warp $v
  GPUSCAN_EXP_LOOKWARP=$lw timeout 240 ncu --section SpeedOfLight --section SchedulerStats --section WarpStateStats \
    --section Occupancy -k regex:OnePassKernel -s 3 -c 1 $B/kernel_suite --ops scan --algorithms deterministic \
    --dtypes float32 --sizes 2^26 --reps 3 --warmup 1 >"$out/ncu_$v.txt" 2>&1
  grep -E "Duration|DRAM Throughput|Issued Warp|No Eligible|Active Warps Per|Eligible Warps|Stall|Achieved Occupancy|Registers|Warp Cycles Per Issued|Local" "$out/ncu_$v.txt" | head -30
done
