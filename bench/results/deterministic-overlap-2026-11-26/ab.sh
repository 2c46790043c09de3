#!/usr/bin/env bash
# ON the GPU machine (carry .gpu-pack: kernel_suite of this change, kernel_suite_main = main, and
# gpu_kernel_tests when the pack has it: the canonical and segmented tests first): main / new
# alternating, float32 and float64 deterministic scans at 2^20, 2^24, 2^28, 2^30, ROUNDS rounds.
source scripts/lib/gpu-common.sh && gpu_setup >/dev/null
export LD_LIBRARY_PATH=$R
if [ -x $B/gpu_kernel_tests ]; then
  step canonical tests
  timeout 200 $B/gpu_kernel_tests --gtest_brief=1 --gtest_filter='Canonical*:*Determin*:*Segmented*' 2>&1 | tail -3
fi
for r in $(seq 1 ${ROUNDS:-3}); do
  for v in main new; do
    bin=$B/kernel_suite; [ $v = main ] && bin=$B/kernel_suite_main
    step $v round $r
    timeout 150 $bin --ops scan --algorithms deterministic --dtypes float32,float64 --sizes 2^20,2^24,2^28,2^30 \
      >"$out/ab_${v}_$r.txt" 2>&1
    echo "rc $?"; grep -E "^scan +determ" "$out/ab_${v}_$r.txt" | awk '{printf "%s %s %s %s | ", $3, $4, $7, $8} NR%4==0 {print ""}'
  done
done
