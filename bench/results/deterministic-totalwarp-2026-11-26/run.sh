#!/usr/bin/env bash
# ON the GPU machine (carry .gpu-pack: gpu_kernel_tests and kernel_suite of the change: a ninth
# warp a block computes the supers' totals, float32's phase 1 waits for nothing;
# kernel_suite_main = main before it): kernel tests, memcheck and synccheck on the canonical
# tests, then main / new alternating, ROUNDS rounds, with CUB, copy and the look-back scan in the
# same runs.
source scripts/gpu-common.sh >/dev/null
export LD_LIBRARY_PATH=$R
if [ -x $B/gpu_kernel_tests ]; then
  step kernel tests
  timeout 300 $B/gpu_kernel_tests --gtest_brief=1 2>&1 | tail -3
  for tool in memcheck synccheck; do
    step $tool, canonical tests
    timeout 300 compute-sanitizer --tool $tool --error-exitcode 9 $B/gpu_kernel_tests --gtest_brief=1 \
      --gtest_filter='Canonical*' 2>&1 | tail -3
  done
fi
for r in $(seq 1 ${ROUNDS:-3}); do
  for v in main new; do
    bin=$B/kernel_suite; [ $v = main ] && bin=$B/kernel_suite_main
    step $v round $r
    timeout 200 $bin --ops scan,reduce --algorithms decoupled_lookback,deterministic --dtypes float32,float64 \
      --sizes ${SIZES:-2^16,2^20,2^22,2^24,2^26,2^28,2^30} >"$out/ks_${v}_$r.txt" 2>&1
    echo "rc $?"; grep -E "^scan +determ" "$out/ks_${v}_$r.txt" | awk '{printf "%s %s %s %s %s | ", $3, $4, $7, $8, $9} NR%7==0 {print ""}'
  done
done
grep -hE "^scan +decoupled" "$out"/ks_new_*.txt | awk '$4=="2^28" || $4=="2^30" {print "look-back", $3, $4, $7}'
