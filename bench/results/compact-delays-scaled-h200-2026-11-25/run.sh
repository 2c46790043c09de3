#!/usr/bin/env bash
# The committed rule for compaction's sleeps (scaled by bandwidth: 1670 / 835 ns on the H200):
# compaction tests, then three kernel-suite rounds. Asked as nvidia-h200; the build of 154c142.
#   here:    scripts/gpu pack --targets "gpu_kernel_tests kernel_suite"
#   device:  run(command="bash bench/results/compact-delays-scaled-h200-2026-11-25/run.sh", carry=[".gpu-pack"], kind="nvidia-h200", timeout_s=590)
# Under $OUT: device.txt, kernel_tests.log, ks_compact_{1,2,3}.{txt,json}.
source scripts/lib/gpu-common.sh
gpu_setup >/dev/null
step compaction kernel tests
timeout 200 $B/gpu_kernel_tests --gtest_brief=1 --gtest_filter='*ompact*' 2>&1 | tee "$out/kernel_tests.log" | tail -2
for r in 1 2 3; do
  step kernel suite compaction round $r
  timeout 200 $B/kernel_suite --ops compact --dtypes int32,float32,int64,float64 --sizes 2^20,2^24,2^28,2^30 \
    --json "$out/ks_compact_$r.json" >"$out/ks_compact_$r.txt" 2>&1
  echo "rc $?"; grep -E "^compact single" "$out/ks_compact_$r.txt" | awk '{print $1, $2, $3, $4, $5, $7, $8}'
done
