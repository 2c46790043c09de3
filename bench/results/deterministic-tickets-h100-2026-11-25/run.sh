#!/usr/bin/env bash
# The kept deterministic kernel (variant 2 without prefetch, no switches; commit d0549f8): the
# checks of `scripts/gpu run deterministic` (canonical kernel tests, memcheck, racecheck, engine and
# RPC determinism tests), the segmented kernel tests, then the kernel suite's deterministic rows
# beside CUB, two rounds. Made final/.
#   here:    scripts/gpu pack
#   device:  run(command="bash bench/results/deterministic-tickets-h100-2026-11-25/run.sh", carry=[".gpu-pack"], kind="nvidia-h100-x1", timeout_s=590)
# Under $OUT: the deterministic suite's logs, kernel_segmented.log, ks_{1,2}.{txt,json}.
source scripts/lib/gpu-common.sh
gpu_setup >/dev/null
OUT=$out GPU_LOGS_TGZ='' bash scripts/gpu run deterministic
step kernel tests: segmented scans
timeout 200 "$B/gpu_kernel_tests" --gtest_brief=1 --gtest_filter='*Segmented*' >"$out/kernel_segmented.log" 2>&1
tail -1 "$out/kernel_segmented.log"; grep -m3 -B2 -A6 "Failure" "$out/kernel_segmented.log"
for round in 1 2; do
  step "kernel suite, round $round"
  timeout 200 "$B/kernel_suite" --ops scan --algorithms deterministic,cub --dtypes float32,float64 \
    --sizes 2^12,2^16,2^20,2^22,2^24,2^26,2^28,2^30 --reps 15 --json "$out/ks_$round.json" >"$out/ks_$round.txt" 2>&1
  grep -E "deterministic" "$out/ks_$round.txt" | awk '{print $3, $4, $5, $7, $8, $9}'
done
