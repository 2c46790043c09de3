#!/usr/bin/env bash
# ON the GPU machine (carry .gpu-pack): run.sh's pack rebuilt with the look-back watching its 4
# nearest super words first (all 32 only after them) and the reduce's carry fold unrolled: the
# canonical tests, then main / new alternating, ROUNDS rounds.
source scripts/gpu-common.sh >/dev/null
export LD_LIBRARY_PATH=$R
step canonical tests
timeout 200 $B/gpu_kernel_tests --gtest_brief=1 --gtest_filter='Canonical*:*Determin*:*Segmented*' 2>&1 | tail -3
for r in $(seq 1 ${ROUNDS:-2}); do
  for v in main new; do
    bin=$B/kernel_suite; [ $v = main ] && bin=$B/kernel_suite_main
    step $v round $r
    timeout 150 $bin --ops scan,reduce --algorithms deterministic --dtypes float32,float64 \
      --sizes 2^20,2^24,2^28,2^30 >"$out/ks_${v}_$r.txt" 2>&1
    echo "rc $?"; grep -E "^(scan|reduce) +determ" "$out/ks_${v}_$r.txt" | awk '{printf "%s %s %s %s %s %s | ", $1, $3, $4, $7, $8, $9} NR%4==0 {print ""}'
  done
done
