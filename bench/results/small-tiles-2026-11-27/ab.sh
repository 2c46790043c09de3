#!/usr/bin/env bash
# ON the GPU machine (carry .gpu-pack: gpu_kernel_tests and kernel_suite of the Tiny policy,
# kernel_suite_idx with the tile by index only, kernel_suite_main before both): the scan tests and
# compute-sanitizer on the look-back scan's, then main / idx / new alternating on small 4-byte
# look-back scans (ROUNDS rounds, 301 calls a row).
source scripts/lib/gpu-common.sh && gpu_setup >/dev/null
export LD_LIBRARY_PATH=$R
step tests
timeout 300 $B/gpu_kernel_tests --gtest_brief=1 --gtest_filter='*ScanTest*:*Segmented*' 2>&1 | tail -3
san=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
for tool in memcheck racecheck; do
  step $tool
  timeout 240 $san --tool $tool --error-exitcode 9 $B/gpu_kernel_tests --gtest_brief=1 \
    --gtest_filter='Algorithms/ScanTest.*/decoupled_lookback-*Large*:*SplitOver*' 2>&1 | tail -3
done
for r in $(seq 1 ${ROUNDS:-3}); do
  for v in main idx new; do
    bin=$B/kernel_suite_$v; [ $v = new ] && bin=$B/kernel_suite
    step $v round $r
    timeout 150 $bin --ops scan --algorithms decoupled_lookback --dtypes int32,float32 \
      --sizes 2^10,2^12,2^13,2^14,2^15,2^16,2^17,2^18,2^20 --reps 301 >"$out/${v}_$r.txt" 2>&1
    echo "rc $?"; awk '/^copy/ {c=$5} /^scan +cub/ {u=$5} /^scan +decoupled/ {printf "%s %s %s/%s/%s us %.3fx | ", $3, $4, c, u, $5, $5/u} /^scan +decoupled/ && ++k%3==0 {print ""}' "$out/${v}_$r.txt"; echo
  done
done
