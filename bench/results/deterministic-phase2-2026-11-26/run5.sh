#!/usr/bin/env bash
# ON the GPU machine (carry .gpu-pack: tune_bench, tune_bench_pad, gpu_kernel_tests): phase 1's
# Hillis-Steele with levels 1..16 in registers (4 barriers instead of 8), A/B against the build
# before it (tune_bench_pad), alternating, two rounds; the canonical and segmented kernel tests on
# the new build first (bit for bit against the tree's host reference).
source scripts/gpu-common.sh >/dev/null
step canonical kernel tests
timeout 200 $B/gpu_kernel_tests --gtest_brief=1 --gtest_filter='*anonical*:*egmented*' 2>&1 | tail -3
for r in 1 2; do
  step round $r: before
  timeout 250 $B/tune_bench_pad det >"$out/before_$r.txt" 2>&1; echo "rc $?"
  grep -E "MISMATCH" "$out/before_$r.txt" | head -3
  grep -E " (4194304|16777216|67108864|268435456|1073741824|536870912) " "$out/before_$r.txt" | grep -E "cub|default"
  step round $r: levels 1..16 in registers
  timeout 250 $B/tune_bench det >"$out/after_$r.txt" 2>&1; echo "rc $?"
  grep -E "MISMATCH" "$out/after_$r.txt" | head -3
  grep -E " (4194304|16777216|67108864|268435456|1073741824|536870912) " "$out/after_$r.txt" | grep -E "cub|default"
done
