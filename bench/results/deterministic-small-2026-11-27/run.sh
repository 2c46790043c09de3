#!/usr/bin/env bash
# ON the GPU machine (carry .gpu-pack: gpu_kernel_tests and kernel_suite of the change,
# kernel_suite_main before it): the canonical tests, memcheck and racecheck on them, then main / new
# alternating on the deterministic float scans, small sizes and 2^28 (ROUNDS rounds, 301 calls a
# row below 2^20).
source scripts/lib/gpu-common.sh && gpu_setup >/dev/null
export LD_LIBRARY_PATH=$R
step tests
timeout 300 $B/gpu_kernel_tests --gtest_brief=1 --gtest_filter='Canonical*:*Determin*:*Segmented*' 2>&1 | tail -3
san=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
for tool in memcheck racecheck; do
  step $tool
  timeout 240 $san --tool $tool --error-exitcode 9 $B/gpu_kernel_tests --gtest_brief=1 \
    --gtest_filter='CanonicalKernelTest.Float32Sum:CanonicalKernelTest.Float64Sum' 2>&1 | tail -3
done
for r in $(seq 1 ${ROUNDS:-3}); do
  for v in main new; do
    bin=$B/kernel_suite; [ $v = main ] && bin=$B/kernel_suite_main
    step $v round $r
    timeout 150 $bin --ops scan --algorithms deterministic --dtypes float32,float64 \
      --sizes 2^12,2^14,2^16,2^17,2^18 --reps 301 >"$out/${v}_$r.txt" 2>&1
    timeout 150 $bin --ops scan --algorithms deterministic --dtypes float32,float64 \
      --sizes 2^20,2^24,2^28 >>"$out/${v}_$r.txt" 2>&1
    echo "rc $?"; awk '/^copy/ {c=$5} /^scan +cub/ {u=$5} /^scan +determ/ {printf "%s %s %s/%s/%s us %.3fx %s | ", $3, $4, c, u, $5, $5/u, $7} /^scan +determ/ && ++k%4==0 {print ""}' "$out/${v}_$r.txt"; echo
  done
done
