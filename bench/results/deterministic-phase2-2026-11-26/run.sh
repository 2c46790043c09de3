#!/usr/bin/env bash
# ON the GPU machine (carry .gpu-pack: tune_bench, kernel_suite), asked as nvidia-h200: the
# deterministic scan's tiles a block (2 or 3) and persistent blocks a SM, two rounds, every variant
# checked bit for bit against the default; then Nsight Compute on its one-pass kernel and on the
# int32 look-back at 2^28, to see where the H200 loses what the H100 has.
source scripts/gpu-common.sh >/dev/null
for r in 1 2; do
  step tune_bench det round $r
  timeout 250 $B/tune_bench det >"$out/tune_det_$r.txt" 2>&1; echo "rc $?"
  head -1 "$out/tune_det_$r.txt"; grep -E "MISMATCH" "$out/tune_det_$r.txt" | head -3
  grep -E " (16777216|268435456|1073741824|536870912) " "$out/tune_det_$r.txt"
done
ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null || echo ncu)
secs="--section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis"
prof() {  # name kernel-regex dtype algorithm
  step "ncu $1"
  timeout 150 $ncu $secs -k "regex:$2" --launch-skip 2 --launch-count 1 $B/kernel_suite --ops scan --algorithms "$4" \
    --dtypes "$3" --sizes 2^28 --reps 3 >"$out/ncu_$1.txt" 2>&1
  grep -E "Duration|DRAM Throughput|Registers Per|Achieved Occupancy|Theoretical Occupancy|Block Limit|Warp Cycles Per Issued|Stall|Issued Ipc|Eligible|No Eligible|Dynamic Shared" "$out/ncu_$1.txt" | head -30
}
prof det_f32 OnePassKernel float32 deterministic
prof lookback_i32 SinglePassScanKernel int32 decoupled_lookback
