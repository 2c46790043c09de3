#!/usr/bin/env bash
# ON the GPU machine (carry .gpu-pack: tune_bench, tune_bench_v1, gpu_kernel_tests): the tiles'
# padding for 8-byte types (one element per 16, not 32: the half-warp's 8-byte accesses were
# two-way bank conflicted), A/B against the build before it (tune_bench_v1: its "v1" rows are
# that kernel), alternating, two rounds; the canonical kernel tests on the new build first.
source scripts/gpu-common.sh >/dev/null
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
