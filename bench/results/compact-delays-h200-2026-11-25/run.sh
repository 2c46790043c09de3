#!/usr/bin/env bash
# Compaction's look-back sleeps swept now that they are a launch argument (tuning.cuh CompactDelays),
# two tune_bench rounds; the scan's longer tiles once; the compaction tests and the kernel suite's
# compaction rows with the library's per-device choice. Asked as nvidia-h200.
#   here:    scripts/gpu pack --targets "gpu_kernel_tests kernel_suite tune_bench"
#   device:  run(command="bash bench/results/compact-delays-h200-2026-11-25/run.sh", carry=[".gpu-pack"], kind="nvidia-h200", timeout_s=590)
# Under $OUT: device.txt, kernel_tests.log, tune_compact_{1,2}.txt, tune_scan.txt, ks_compact_{1,2}.{txt,json}.
source scripts/lib/gpu-common.sh
gpu_setup >/dev/null
step compaction kernel tests
timeout 200 $B/gpu_kernel_tests --gtest_brief=1 --gtest_filter='*ompact*' 2>&1 | tee "$out/kernel_tests.log" | tail -3
for r in 1 2; do
  step tune_bench compact round $r
  timeout 200 $B/tune_bench compact >"$out/tune_compact_$r.txt" 2>&1; echo "rc $?"
  head -1 "$out/tune_compact_$r.txt"; grep -E " 268435456 " "$out/tune_compact_$r.txt"
done
step tune_bench scan
timeout 300 $B/tune_bench scan >"$out/tune_scan.txt" 2>&1; echo "rc $?"
grep -E " (268435456|1073741824) " "$out/tune_scan.txt"
for r in 1 2; do
  step kernel suite compaction round $r
  timeout 200 $B/kernel_suite --ops compact --dtypes int32,float32,int64,float64 --sizes 2^20,2^24,2^28,2^30 \
    --json "$out/ks_compact_$r.json" >"$out/ks_compact_$r.txt" 2>&1
  echo "rc $?"; grep -E "^compact " "$out/ks_compact_$r.txt" | awk '{print $1, $2, $3, $4, $5, $7, $8}'
done
