#!/usr/bin/env bash
# The one-pass deterministic scan with persistent blocks that start the next tile's loads before
# scanning the current one. Correctness first (`scripts/gpu run deterministic`: bit for bit against
# the tree's reference, memcheck, racecheck, engine and RPC tests; the canonical tests again without
# the prefetch), then the kernel suite with and without the prefetch, two rounds. The experiment
# build read GPUSCAN_CANON_NO_PREFETCH (and, in the earlier calls README.md lists, the switches it
# names), since removed: pack that build to run it again. The last call made final-ab/.
#   here:    scripts/gpu pack
#   device:  run(command="bash bench/results/deterministic-persistent-h100-2026-11-25/run.sh", carry=[".gpu-pack"], kind="nvidia-h100-x1", timeout_s=590)
# Under $OUT: the deterministic suite's logs, ks_{prefetch,no_prefetch}_{1,2}.{txt,json}.
source scripts/lib/gpu-common.sh
gpu_setup >/dev/null
OUT=$out GPU_LOGS_TGZ='' bash scripts/gpu run deterministic
GPUSCAN_CANON_NO_PREFETCH=1 timeout 120 "$B/gpu_kernel_tests" --gtest_brief=1 --gtest_filter='CanonicalKernel*' 2>&1 \
  | tail -1 | sed "s/^/no prefetch: /"
for round in 1 2; do
  for v in prefetch no_prefetch; do
    step "kernel suite, $v, round $round"
    if [ $v = no_prefetch ]; then export GPUSCAN_CANON_NO_PREFETCH=1; else unset GPUSCAN_CANON_NO_PREFETCH; fi
    timeout 200 "$B/kernel_suite" --ops scan --algorithms deterministic,cub --dtypes float32,float64 \
      --sizes 2^12,2^16,2^20,2^24,2^28,2^30 --reps 15 --json "$out/ks_${v}_$round.json" >"$out/ks_${v}_$round.txt" 2>&1
    grep -E "deterministic|cub .*2\^2[48]" "$out/ks_${v}_$round.txt"
  done
done
