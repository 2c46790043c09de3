#!/usr/bin/env bash
# ON the GPU machine (carry .gpu-pack: gpu_kernel_tests and kernel_suite of overlap.diff: a super's
# total computed during the phase 2 of the tile before its last, not in the last tile's phase 1;
# kernel_suite_main = main): the kernel tests, memcheck and synccheck on the canonical kernels,
# then main / new alternating, ROUNDS rounds.
source scripts/lib/gpu-common.sh && gpu_setup >/dev/null
export LD_LIBRARY_PATH=$R
san=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
step kernel tests
timeout 300 $B/gpu_kernel_tests --gtest_brief=1 >"$out/gpu_kernel.log" 2>&1; echo "rc $?"; tail -3 "$out/gpu_kernel.log"
for tool in memcheck synccheck; do
  step $tool on the canonical kernels
  timeout 200 "$san" --tool $tool --error-exitcode 9 $B/gpu_kernel_tests --gtest_brief=1 \
    --gtest_filter='CanonicalKernelTest.Float32Sum:CanonicalKernelTest.Float64Sum' >"$out/$tool.log" 2>&1
  echo "rc $?"; tail -2 "$out/$tool.log"
done
for r in $(seq 1 ${ROUNDS:-2}); do
  for v in main new; do
    bin=$B/kernel_suite; [ $v = main ] && bin=$B/kernel_suite_main
    step $v round $r
    timeout 150 $bin --ops scan --algorithms deterministic --dtypes float32,float64 \
      --sizes 2^20,2^24,2^28,2^30 >"$out/ks_${v}_$r.txt" 2>&1
    echo "rc $?"; grep -E "^scan +determ" "$out/ks_${v}_$r.txt" | awk '{printf "%s %s %s %s %s %s | ", $1, $3, $4, $7, $8, $9} NR%4==0 {print ""}'
  done
done
