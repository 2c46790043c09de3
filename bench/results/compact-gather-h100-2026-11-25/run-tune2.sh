#!/usr/bin/env bash
# ON the GPU machine: the second round of compaction policies (tiles around 128 x 32 with the
# slim gather, delays, 64-bit keep masks; 8-byte tiles around 256 x 16).
source scripts/gpu-common.sh
step tune_bench compact, round 2
timeout 240 $B/tune_bench compact 2>&1 | tee "$out/tune_compact2.txt" | grep -E "2\^28|268435456" | head -40
