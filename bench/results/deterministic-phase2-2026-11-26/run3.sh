#!/usr/bin/env bash
# ON the GPU machine (carry .gpu-pack: kernel_suite, gpu_kernel_tests): the canonical kernel tests
# on the build with the carry beside the aggregates; Nsight Compute on the deterministic one pass
# (float64 and float32, 2^28): what float64 still waits on.
source scripts/gpu-common.sh >/dev/null
step canonical kernel tests
timeout 200 $B/gpu_kernel_tests --gtest_brief=1 --gtest_filter='*anonical*' 2>&1 | tail -3
ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null || echo ncu)
secs="--section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis --section SourceCounters"
prof() {  # name kernel-regex dtype algorithm
  step "ncu $1"
  timeout 150 $ncu $secs --import-source no -k "regex:$2" --launch-skip 2 --launch-count 1 $B/kernel_suite --ops scan --algorithms "$4" \
    --dtypes "$3" --sizes 2^28 --reps 3 >"$out/ncu_$1.txt" 2>&1
  grep -E "Duration|DRAM Throughput|Registers Per|Achieved Occupancy|Block Limit Sh|Block Limit Reg|Warp Cycles Per Issued|Issued Ipc|Eligible Warps|No Eligible" "$out/ncu_$1.txt" | head -14
}
prof det_f64 OnePassKernel float64 deterministic
prof det_f32 OnePassKernel float32 deterministic
timeout 100 $ncu --metrics smsp__pcsamp_warps_issue_stalled_barrier,smsp__pcsamp_warps_issue_stalled_long_scoreboard,smsp__pcsamp_warps_issue_stalled_short_scoreboard,smsp__pcsamp_warps_issue_stalled_wait,smsp__pcsamp_warps_issue_stalled_membar,smsp__pcsamp_warps_issue_stalled_lg_throttle,smsp__pcsamp_warps_issue_stalled_mio_throttle,smsp__pcsamp_warps_issue_stalled_math_pipe_throttle,smsp__pcsamp_warps_issue_stalled_sleeping,smsp__pcsamp_warps_issue_stalled_selected,smsp__pcsamp_warps_issue_stalled_not_selected,smsp__pcsamp_warps_issue_stalled_branch_resolving,smsp__pcsamp_warps_issue_stalled_dispatch_stall,smsp__pcsamp_warps_issue_stalled_drain,smsp__pcsamp_warps_issue_stalled_imc_miss,smsp__pcsamp_warps_issue_stalled_no_instructions,smsp__pcsamp_warps_issue_stalled_misc,smsp__pcsamp_warps_issue_stalled_tex_throttle \
  -k regex:OnePassKernel --launch-skip 2 --launch-count 1 $B/kernel_suite --ops scan --algorithms deterministic --dtypes float64 --sizes 2^28 --reps 3 >"$out/ncu_f64_stalls.txt" 2>&1
grep -E "pcsamp" "$out/ncu_f64_stalls.txt"
