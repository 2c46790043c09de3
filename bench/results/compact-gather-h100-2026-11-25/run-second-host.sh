#!/usr/bin/env bash
# ON the GPU machine (repo root, .gpu-pack carried): compaction and the default scan against CUB
# and a copy, and tune_bench's compaction variants. Asked for as nvidia-h200; the warm H100 ran it
# (a second round on the H100 with the final binaries).
source scripts/gpu-common.sh
step kernel suite, compaction and scan
timeout 300 $B/kernel_suite --ops compact,scan --algorithms single_pass,decoupled_lookback \
  --dtypes int32,float32,int64,float64 --sizes 2^16,2^24,2^28,2^30 \
  --json "$out/ks_compact_scan_second_host.json" >"$out/ks_compact_scan_second_host.txt" 2>&1
grep -E "2\^(28|30) " "$out/ks_compact_scan_second_host.txt"
step tune_bench compact
timeout 150 $B/tune_bench compact 2>&1 | tee "$out/tune_compact_second_host.txt" | grep -E "268435456"
