#!/usr/bin/env bash
# ON the GPU machine (carry .gpu-pack: gpu_kernel_tests and kernel_suite of window.diff: with
# GPUSCAN_EXP_WINDOW=K a block about to take tile t of super b first waits until the carry C_{b-K}
# is out, when super b-K's first tile is older than every tile the block holds; kernel_suite_main =
# main): canonical tests with K = 2, then main / K = 2, 3, 4, 6 alternating, float32, ROUNDS rounds.
source scripts/gpu-common.sh >/dev/null
export LD_LIBRARY_PATH=$R
step canonical tests, window 2
GPUSCAN_EXP_WINDOW=2 timeout 300 $B/gpu_kernel_tests --gtest_brief=1 --gtest_filter='Canonical*:*Determin*' 2>&1 | tail -3
for r in $(seq 1 ${ROUNDS:-2}); do
  for v in main 2 3 4 6; do
    bin=$B/kernel_suite; [ $v = main ] && bin=$B/kernel_suite_main
    if [ $v = main ]; then unset GPUSCAN_EXP_WINDOW; else export GPUSCAN_EXP_WINDOW=$v; fi
    step window $v round $r
    timeout 100 $bin --ops scan --algorithms deterministic --dtypes float32 \
      --sizes 2^24,2^26,2^28,2^30 >"$out/ks_${v}_$r.txt" 2>&1
    echo "rc $?"; grep -E "^scan +determ" "$out/ks_${v}_$r.txt" | awk '{printf "%s %s %s %s %s | ", $3, $4, $7, $8, $9} NR%4==0 {print ""}'
  done
done
