#!/usr/bin/env bash
# ON the GPU machine (carry .gpu-pack: kernel_suite): where a 2^16 call's time goes. The suite
# times each call alone between two events (launch latency + kernel); nsys gives each kernel's
# own duration and the gap from the start event to it, for the copy, CUB and the look-back scan.
source scripts/gpu-common.sh >/dev/null
export LD_LIBRARY_PATH=$R
which nsys ncu | tee "$out/tools.txt"
NSYS=$(command -v nsys || ls /usr/local/cuda/bin/nsys /opt/nvidia/nsight-systems/*/bin/nsys 2>/dev/null | head -1)
step suite
$B/kernel_suite --ops scan --algorithms decoupled_lookback --dtypes int32,float32 --sizes 2^12,2^16,2^18 --reps 301 \
  >"$out/ks.txt" 2>&1; grep -E "^(scan|copy)" "$out/ks.txt" | head -20
if [ -n "$NSYS" ]; then
  step nsys
  timeout 200 "$NSYS" profile -t cuda -o "$out/trace" --force-overwrite true $B/kernel_suite --ops scan \
    --algorithms decoupled_lookback --dtypes int32 --sizes 2^16 --reps 40 --warmup 2 >"$out/nsys_run.txt" 2>&1
  "$NSYS" stats --report cuda_gpu_trace,cuda_api_sum,cuda_gpu_kern_sum --format csv -o "$out/stats" "$out/trace.nsys-rep" \
    >"$out/nsys_stats.txt" 2>&1
  ls "$out"; head -30 "$out"/stats_cuda_gpu_kern_sum.csv 2>/dev/null
else
  step ncu
  timeout 200 ncu --metrics gpu__time_duration.sum --csv $B/kernel_suite --ops scan --algorithms decoupled_lookback \
    --dtypes int32 --sizes 2^16 --reps 20 --warmup 1 >"$out/ncu.csv" 2>&1; tail -20 "$out/ncu.csv"
fi
