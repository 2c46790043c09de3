#!/usr/bin/env bash
# ON the GPU machine (carry .gpu-pack: gpu_kernel_tests and kernel_suite of the committed change,
# kernel_suite_old = main before it; optionally gpu_engine_tests): kernel tests, memcheck on the
# canonical tests, the engine tests if packed, then old / new alternating, ROUNDS rounds, with the
# look-back scan and CUB in the same runs.
rm -rf .gpu-bin .gpu-rt
source scripts/lib/gpu-common.sh && gpu_setup >/dev/null
export LD_LIBRARY_PATH=$R
if [ -x $B/gpu_kernel_tests ]; then
  step kernel tests
  timeout 300 $B/gpu_kernel_tests --gtest_brief=1 2>&1 | tail -3
  step memcheck, canonical tests
  timeout 300 compute-sanitizer --tool memcheck --error-exitcode 9 $B/gpu_kernel_tests --gtest_brief=1 \
    --gtest_filter='Canonical*' 2>&1 | tail -3
fi
if [ -x $B/gpu_engine_tests ]; then
  step engine tests
  timeout 300 $B/gpu_engine_tests --gtest_brief=1 2>&1 | tail -3
fi
for r in $(seq 1 ${ROUNDS:-3}); do
  for v in old new; do
    bin=$B/kernel_suite; [ $v = old ] && bin=$B/kernel_suite_old
    step $v round $r
    timeout 200 $bin --ops scan,reduce --algorithms decoupled_lookback,deterministic --dtypes float32,float64 \
      --sizes ${SIZES:-2^16,2^20,2^22,2^24,2^26,2^28,2^30} >"$out/ks_${v}_$r.txt" 2>&1
    echo "rc $?"; grep -E "^(scan|reduce) +determ" "$out/ks_${v}_$r.txt" | awk '{printf "%s %s %s %s %s %s %s | ", $1, $3, $4, $5, $7, $8, $9} NR%7==0 {print ""}'
  done
done
grep -hE "^scan +decoupled" "$out"/ks_new_*.txt | awk '$4=="2^28" || $4=="2^30" {print "look-back", $3, $4, $7}'
