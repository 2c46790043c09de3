#!/usr/bin/env bash
# ON the GPU machine (repo root, .gpu-pack carried): look-back delays for the default scan (int32,
# float32, int64, float64) and compaction, every variant checked against CUB.
source scripts/gpu-common.sh
step tune_bench scan scan8 compact
timeout 500 $B/tune_bench scan scan8 compact 2>&1 | tee "$out/tune_delays.txt" | grep -E " (16777216|268435456|536870912|1073741824) " | grep -v "delays from\|never delay\|from 500"
