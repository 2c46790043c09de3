#!/usr/bin/env bash
# ON the GPU machine (repo root, .gpu-pack carried): the default scan against longer tiles
# (tune_bench scan and scan8: int32, float32, int64, float64; every variant checked against CUB).
source scripts/gpu-common.sh
step tune_bench scan scan8
timeout 400 $B/tune_bench scan scan8 2>&1 | tee "$out/tune_scan.txt" | grep -E " (1048576|16777216|268435456|1073741824) " | grep -v "delays from\|never delay\|from 500"
