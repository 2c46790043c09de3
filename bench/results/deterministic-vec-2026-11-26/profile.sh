#!/usr/bin/env bash
# ON the GPU machine (carry .gpu-pack: kernel_suite, the committed build): ncu of one
# deterministic float32 scan at 2^28 (OnePassKernel) and one look-back scan beside it: speed of
# light, scheduler and warp-state sections (what a warp waits on).
source scripts/gpu-common.sh >/dev/null
export LD_LIBRARY_PATH=$R
for k in OnePassKernel SinglePassScanBulkKernel; do
  step ncu $k
  timeout 240 ncu --section SpeedOfLight --section SchedulerStats --section WarpStateStats --section Occupancy \
    --section MemoryWorkloadAnalysis -k regex:$k -s 3 -c 1 $B/kernel_suite --ops scan \
    --algorithms decoupled_lookback,deterministic --dtypes float32 --sizes 2^28 --reps 3 --warmup 1 >"$out/ncu_$k.txt" 2>&1
  grep -E "Duration|DRAM Throughput|Compute \(SM\)|Issued Warp|No Eligible|Active Warps Per|Eligible Warps|Stall|Achieved Occupancy|Registers|Block Limit|L1/TEX Hit|L2 Hit|Mem Busy|Max Bandwidth|Warp Cycles Per Issued" "$out/ncu_$k.txt" | head -40
done
