#!/usr/bin/env bash
# The deterministic scan's tiles padded for 8-byte types (one element per 16, not 32: the
# half-warp's 8-byte accesses were two-way bank conflicted), A/B against the build before it
# (tune_bench_v1: its "v1" rows are that kernel), alternating, two rounds; the canonical kernel
# tests on the new build first. Made 4-pad-h100 and 4-pad-h200 (the figures tuning.cuh cites).
#   here:    scripts/gpu pack --targets "gpu_kernel_tests tune_bench" --extra tune_bench_v1=V1_BUILD/bin/tune_bench
#   device:  run(command="bash bench/results/deterministic-phase2-2026-11-26/run.sh", carry=[".gpu-pack"], kind="nvidia-h100-x1", timeout_s=590)
# Under $OUT: device.txt, before_{1,2}.txt, after_{1,2}.txt.
source scripts/lib/gpu-common.sh
gpu_setup >/dev/null
step canonical kernel tests
timeout 200 $B/gpu_kernel_tests --gtest_brief=1 --gtest_filter='*anonical*:*egmented*' 2>&1 | tail -3
for r in 1 2; do
  step round $r: before
  timeout 250 $B/tune_bench_v1 det >"$out/before_$r.txt" 2>&1; echo "rc $?"
  grep -E "MISMATCH" "$out/before_$r.txt" | head -3
  grep -E " (16777216|268435456|1073741824|536870912) " "$out/before_$r.txt" | grep -E "cub|v1: "
  step round $r: padded by 128 bytes
  timeout 250 $B/tune_bench det >"$out/after_$r.txt" 2>&1; echo "rc $?"
  grep -E "MISMATCH" "$out/after_$r.txt" | head -3
  grep -E " (16777216|268435456|1073741824|536870912) " "$out/after_$r.txt" | grep -v "^copy"
done
