#!/usr/bin/env bash
# ON the GPU machine (carry .gpu-pack: gpu_kernel_tests, kernel_suite of onetile.diff's build):
# the deterministic scan as a block a tile (GPUSCAN_EXP_ONETILE=1) against the persistent kernel,
# same binary: canonical kernel tests and memcheck with it, then the two alternating, ROUNDS rounds.
rm -rf .gpu-bin .gpu-rt
source scripts/gpu-common.sh >/dev/null
export LD_LIBRARY_PATH=$R
step canonical kernel tests, one tile a block
GPUSCAN_EXP_ONETILE=1 timeout 300 $B/gpu_kernel_tests --gtest_brief=1 --gtest_filter='Canonical*' 2>&1 | tail -3
step memcheck, canonical tests, one tile a block
GPUSCAN_EXP_ONETILE=1 timeout 300 compute-sanitizer --tool memcheck --error-exitcode 9 $B/gpu_kernel_tests \
  --gtest_brief=1 --gtest_filter='Canonical*' 2>&1 | tail -3
for r in $(seq 1 ${ROUNDS:-2}); do
  for v in persistent onetile; do
    unset GPUSCAN_EXP_ONETILE; [ $v = onetile ] && export GPUSCAN_EXP_ONETILE=1
    step $v round $r
    timeout 200 $B/kernel_suite --ops scan --algorithms deterministic --dtypes float32,float64 \
      --sizes ${SIZES:-2^16,2^20,2^24,2^26,2^28,2^30} >"$out/ks_${v}_$r.txt" 2>&1
    echo "rc $?"; grep -E "^scan +determ" "$out/ks_${v}_$r.txt" | awk '{printf "%s %s %s %s %s %s | ", $3, $4, $5, $7, $8, $9} NR%6==0 {print ""}'
  done
done
