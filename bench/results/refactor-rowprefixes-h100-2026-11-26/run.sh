#!/usr/bin/env bash
# ON the GPU machine (carry .gpu-pack: gpu_kernel_tests, kernel_suite, kernel_suite_old): the
# striped tile's block step shared by the register and bulk kernels (StripedRowPrefixes,
# striped.cuh) changed the register kernel's machine code, which the segmented scan runs. The
# kernel tests, then the segmented scan and the look-back scan, old and new binaries alternating.
source scripts/gpu-common.sh >/dev/null
export LD_LIBRARY_PATH=$R
step kernel tests
timeout 240 $B/gpu_kernel_tests --gtest_brief=1 2>&1 | tee "$out/kernel_tests.log" | tail -3
for r in 1 2; do
  for v in old new; do
    bin=$B/kernel_suite; [ $v = old ] && bin=$B/kernel_suite_old
    step $v round $r
    timeout 120 $bin --ops segmented_scan,scan --algorithms decoupled_lookback,fused,cub --dtypes int32,float64 \
      --sizes 2^24,2^28 >"$out/ks_${v}_$r.txt" 2>&1; echo "rc $?"
    grep -E "^(segmented_scan|scan) " "$out/ks_${v}_$r.txt" | grep -v " cub " | awk '{print $1, $2, $3, $4, $5, $7, $8}'
  done
done
