#!/usr/bin/env bash
# ON the GPU machine: after the review mend (compaction's launch tiles from SinglePassBody, no
# behaviour change): the compaction kernel tests and tune_bench compact's checked rows.
source scripts/gpu-common.sh
timeout 200 $B/gpu_kernel_tests --gtest_brief=1 --gtest_filter='*Compact*' 2>&1 | tail -3
timeout 150 $B/tune_bench compact 2>&1 | tee "$out/tune_compact_mend.txt" | grep -E "268435456"
