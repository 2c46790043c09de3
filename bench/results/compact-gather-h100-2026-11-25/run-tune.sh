#!/usr/bin/env bash
# ON the GPU machine (device run, repo root, .gpu-pack carried): compaction policies with the
# slim gather (tune_bench compact, every variant checked against CUB's output), the compaction
# kernel tests on both gathers, and the isolation checks of the build.
source scripts/gpu-common.sh
step tune_bench compact
timeout 240 $B/tune_bench compact 2>&1 | tee "$out/tune_compact.txt" | grep -E "2\^28|^#|compact" | head -60
step compaction kernel tests
timeout 200 $B/gpu_kernel_tests --gtest_brief=1 --gtest_filter='*Compact*' 2>&1 | tee "$out/kernel_compact.log" | tail -4
step "a sticky fault in a device's worker process; the front's suite"
GPUSCAN_BIN_DIR=$B LD_LIBRARY_PATH=$R timeout 200 $B/gpu_engine_tests --gtest_brief=1 --gtest_filter='DeviceDrain*' 2>&1 \
  | grep -v '\[info\]' | tee "$out/drain.log" | tail -4
GPUSCAN_BIN_DIR=$B LD_LIBRARY_PATH=$R timeout 150 $B/isolation_tests --gtest_brief=1 2>&1 | tee "$out/isolation.log" | tail -3
