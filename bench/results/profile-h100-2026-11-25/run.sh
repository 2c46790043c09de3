#!/usr/bin/env bash
# Nsight Compute on three kernels at 2^28 (one launch each, after warm-up): the deterministic one
# pass (float32) and the decoupled look-back (int64 and float64, whose 3-point gap issue 11 asks
# about). Speed of light, occupancy, warp states, source hot spots. Made ncu/.
#   here:    scripts/gpu pack --targets kernel_suite
#   device:  run(command="bash bench/results/profile-h100-2026-11-25/run.sh", carry=[".gpu-pack"], kind="nvidia-h100-x1", timeout_s=590)
# Under $OUT: device.txt, ncu_{det_f32,lookback_i64,lookback_f64}.txt.
source scripts/lib/gpu-common.sh
gpu_setup
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
