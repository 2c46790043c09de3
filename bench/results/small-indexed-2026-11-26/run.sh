#!/usr/bin/env bash
# ON the GPU machine (carry .gpu-pack: gpu_kernel_tests and kernel_suite of the change,
# kernel_suite_main of main): the scan and segmented tests, compute-sanitizer on the look-back
# scan's and the segmented scan's, then main / new alternating on small look-back scans
# (ROUNDS rounds, 301 calls a row), and the segmented scan's small calls.
source scripts/gpu-common.sh >/dev/null
export LD_LIBRARY_PATH=$R
step tests
timeout 300 $B/gpu_kernel_tests --gtest_brief=1 --gtest_filter='*ScanTest*:*Segmented*' 2>&1 | tail -3
san=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
for tool in memcheck racecheck synccheck; do
  step $tool
  timeout 240 $san --tool $tool --error-exitcode 9 $B/gpu_kernel_tests --gtest_brief=1 \
    --gtest_filter='Algorithms/ScanTest.*/decoupled_lookback:SegmentedScanTest.Matches*-*Large*:*SplitOver*' 2>&1 | tail -3
done
sizes=${SIZES:-2^10,2^12,2^14,2^16,2^17,2^18,2^20}
for r in $(seq 1 ${ROUNDS:-3}); do
  for v in main new; do
    bin=$B/kernel_suite; [ $v = main ] && bin=$B/kernel_suite_main
    step $v round $r
    timeout 150 $bin --ops scan --algorithms decoupled_lookback --dtypes int32,float32,int64,float64 \
      --sizes $sizes --reps 301 >"$out/${v}_$r.txt" 2>&1
    echo "rc $?"; awk '/^copy/ {c=$5} /^scan +cub/ {u=$5} /^scan +decoupled/ {printf "%s %s %s/%s/%s us %.3fx | ", $3, $4, c, u, $5, $5/u} /^scan +decoupled/ && ++k%4==0 {print ""}' "$out/${v}_$r.txt"; echo
  done
done
step segmented
for v in main new; do
  bin=$B/kernel_suite; [ $v = main ] && bin=$B/kernel_suite_main
  timeout 150 $bin --ops segmented_scan --dtypes int32,float32 --sizes 2^12,2^16,2^20 --reps 101 >"$out/seg_${v}.txt" 2>&1
  echo "$v rc $?"; grep -E "^segmented" "$out/seg_${v}.txt" | head -12
done
