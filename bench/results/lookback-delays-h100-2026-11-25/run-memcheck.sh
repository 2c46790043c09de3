#!/usr/bin/env bash
# ON the GPU machine: compute-sanitizer memcheck on the scans with the new 8-byte tile and on
# the compaction and segmented kernels (the final run's own memcheck output was cut off).
source scripts/gpu-common.sh
san=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
timeout 300 "$san" --tool memcheck --error-exitcode 9 $B/gpu_kernel_tests --gtest_brief=1 \
  --gtest_filter='Algorithms/ScanTest.Double/decoupled_lookback:Algorithms/ScanTest.SplitOverLaunches/decoupled_lookback:Algorithms/ScanTest.InPlaceAndUnaligned/decoupled_lookback:GpuTest.CompactSplitOverLaunches:Impl/CompactTest.Int32/own:*Segmented*Int32*' 2>&1 \
  | tee "$out/memcheck.log" | tail -4; echo "memcheck exit ${PIPESTATUS[0]}" | tee -a "$out/memcheck.log"
