#!/usr/bin/env bash
# ON the GPU machine (carry .gpu-pack: kernel_suite of phase2.diff's build): the committed
# deterministic kernel with GPUSCAN_EXP_P2 = 0 (as committed), 1 (phase 2 loads and waits for
# nothing: wrong answers), 2 (thread 0 waits only for the aggregate of the tile just before: wrong
# answers), two rounds; then ncu (speed of light, memory workload) of 0 and 1 at 2^26.
rm -rf .gpu-bin .gpu-rt
source scripts/gpu-common.sh >/dev/null
export LD_LIBRARY_PATH=$R
for r in 1 2; do
  for p2 in 0 1 2; do
    echo "== p2 $p2 round $r"
    GPUSCAN_EXP_P2=$p2 timeout 100 $B/kernel_suite --ops scan --algorithms deterministic --dtypes float32,float64 \
      --sizes 2^24,2^28 2>&1 | grep -E '^scan +determ' | awk '{printf "%s %s %s %s %s %s | ", $3,$4,$5,$7,$8,$9} END {print ""}'
  done
done
for p2 in 0 1 2; do
  step ncu p2 $p2
  GPUSCAN_EXP_P2=$p2 timeout 240 ncu --section SpeedOfLight --section MemoryWorkloadAnalysis \
    --metrics dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_write.sum,lts__t_sectors_srcunit_tex_op_read_lookup_miss.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed \
    -k regex:OnePassKernel -s 3 -c 1 $B/kernel_suite --ops scan --algorithms deterministic \
    --dtypes float32 --sizes 2^26 --reps 3 --warmup 1 >"$out/ncu_p2_$p2.txt" 2>&1
  grep -E "Duration|DRAM Throughput|dram__|lts__|L2 Hit|Mem Busy|Max Bandwidth|L1/TEX Hit|Mem Pipes" "$out/ncu_p2_$p2.txt" | head -20
done
