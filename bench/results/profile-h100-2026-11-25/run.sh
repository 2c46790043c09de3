#!/usr/bin/env bash
# ON the GPU machine: Nsight Compute on three kernels at 2^28 (one launch each, after warm-up):
# the deterministic one pass (float32) and the decoupled look-back (int64 and float64, whose
# 3-point gap issue 11 asks about). Speed of light, occupancy, warp states, source hot spots.
source scripts/gpu-common.sh
ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null || echo ncu)
secs="--section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats --section SourceCounters --section MemoryWorkloadAnalysis"
prof() {  # name kernel-regex dtype algorithm
  step "$1"
  timeout 240 $ncu $secs -k "regex:$2" --launch-skip 2 --launch-count 1 $B/kernel_suite --ops scan --algorithms "$4" \
    --dtypes "$3" --sizes 2^28 --reps 3 >"$out/ncu_$1.txt" 2>&1
  grep -E "Duration|DRAM Throughput|Registers Per|Achieved Occupancy|Theoretical Occupancy|Block Limit|Warp Cycles Per Issued|Stall|Issued Ipc|Eligible|No Eligible|Shared Memory Config|Dynamic Shared|Static Shared" "$out/ncu_$1.txt" | head -40
}
prof det_f32 OnePassKernel float32 deterministic
prof lookback_i64 SinglePassScanKernel int64 decoupled_lookback
prof lookback_f64 SinglePassScanKernel float64 decoupled_lookback
