#!/usr/bin/env bash
# ON the GPU machine (carry .gpu-pack: gpu_kernel_tests, kernel_suite, and kernel_suite_old, the
# build before): the register look-back kernel's L2 prefetch before the ticket, for the segmented
# scan and reduce by key (values and keys). Kernel tests and memcheck on the keyed tests, then the
# kernel suite's keyed rows, old and new binaries alternating, two rounds.
source scripts/lib/gpu-common.sh && gpu_setup >/dev/null
export LD_LIBRARY_PATH=$R
san=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
step kernel tests
timeout 240 $B/gpu_kernel_tests --gtest_brief=1 2>&1 | tee "$out/kernel_tests.log" | tail -3
step memcheck, segmented scan and reduce by key tests
timeout 240 $san --tool memcheck --error-exitcode 9 $B/gpu_kernel_tests --gtest_brief=1 \
  --gtest_filter='*Segmented*:*ReduceByKey*' >"$out/memcheck.log" 2>&1
echo "rc $?"; tail -2 "$out/memcheck.log"
for r in 1 2; do
  for v in old new; do
    bin=$B/kernel_suite; [ $v = old ] && bin=$B/kernel_suite_old
    step $v round $r
    timeout 150 $bin --ops segmented_scan,reduce_by_key --dtypes int32 --sizes 2^20,2^24,2^26,2^28,2^30 \
      >"$out/ks_${v}_$r.txt" 2>&1; echo "rc $?"
    grep -E "^(segmented_scan|reduce_by_key) " "$out/ks_${v}_$r.txt" | grep -v " cub " | awk '{print $1, $2, $3, $4, $5, $7, $8, $9}'
  done
done
