#!/usr/bin/env bash
# ON the GPU machine (carry .gpu-pack: gpu_kernel_tests, gpu_engine_tests and kernel_suite built with
# 32-tile supers; kernel_suite_main = main, 256-tile supers): the GPU tests, the sanitizers on the
# canonical kernels, then main / new alternating, deterministic scan and reduce, ROUNDS rounds.
source scripts/gpu-common.sh >/dev/null
export LD_LIBRARY_PATH=$R
san=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
step kernel tests
timeout 300 $B/gpu_kernel_tests --gtest_brief=1 >"$out/gpu_kernel.log" 2>&1; echo "rc $?"; tail -4 "$out/gpu_kernel.log"
step engine tests; [ -x $B/gpu_engine_tests ] && {
timeout 240 $B/gpu_engine_tests --gtest_brief=1 --gtest_filter='-StickyFault*:DeviceDrain*' >"$out/gpu_engine.log" 2>&1
echo "rc $?"; grep -v '\[info\]' "$out/gpu_engine.log" | tail -5; }
for tool in memcheck synccheck racecheck; do
  step $tool on the canonical kernels
  timeout 200 "$san" --tool $tool --error-exitcode 9 $B/gpu_kernel_tests --gtest_brief=1 \
    --gtest_filter='CanonicalKernelTest.Float32Sum:CanonicalKernelTest.StateOnly*' >"$out/$tool.log" 2>&1
  echo "rc $?"; tail -3 "$out/$tool.log"
done
for r in $(seq 1 ${ROUNDS:-2}); do
  for v in main new; do
    bin=$B/kernel_suite; [ $v = main ] && bin=$B/kernel_suite_main
    step $v round $r
    timeout 150 $bin --ops scan,reduce --algorithms deterministic --dtypes float32,float64 \
      --sizes 2^16,2^20,2^24,2^26,2^28,2^30 >"$out/ks_${v}_$r.txt" 2>&1
    echo "rc $?"; grep -E "^(scan|reduce) +determ" "$out/ks_${v}_$r.txt" | awk '{printf "%s %s %s %s %s %s | ", $1, $3, $4, $7, $8, $9} NR%3==0 {print ""}'
  done
done
