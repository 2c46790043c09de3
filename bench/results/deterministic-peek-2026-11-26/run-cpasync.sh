#!/usr/bin/env bash
# ON the GPU machine (carry .gpu-pack: gpu_kernel_tests; kernel_suite = the deterministic scan
# peeking at phase 2's words with cp.async into shared memory at the top of the iteration, a
# commit group before t2's copies, so that phase 1's wait leaves it in flight (float32 only);
# kernel_suite_old = fb42f27): kernel tests, memcheck on the canonical tests, then old and new
# alternating, ROUNDS rounds.
source scripts/gpu-common.sh >/dev/null
export LD_LIBRARY_PATH=$R
step kernel tests
timeout 300 $B/gpu_kernel_tests --gtest_brief=1 2>&1 | tail -4
step memcheck, canonical tests
timeout 300 compute-sanitizer --tool memcheck --error-exitcode 9 $B/gpu_kernel_tests --gtest_brief=1 \
  --gtest_filter='Canonical*' 2>&1 | tail -3
for r in $(seq 1 ${ROUNDS:-3}); do
  for v in old new; do
    bin=$B/kernel_suite; [ $v = old ] && bin=$B/kernel_suite_old
    step $v round $r
    timeout 200 $bin --ops scan --algorithms decoupled_lookback,deterministic --dtypes float32 \
      --sizes ${SIZES:-2^16,2^24,2^26,2^28,2^30} >"$out/ks_${v}_$r.txt" 2>&1
    echo "rc $?"; grep -E "^(scan|reduce) +determ" "$out/ks_${v}_$r.txt" | awk '{printf "%s %s %s %s %s | ", $3, $4, $5, $7, $8} NR%5==0 {print ""}'
  done
done
grep -hE "^scan +decoupled" "$out"/ks_new_*.txt | awk '$4=="2^28" {print "look-back", $3, $4, $7}'
