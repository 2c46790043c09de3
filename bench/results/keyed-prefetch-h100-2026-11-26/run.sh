#!/usr/bin/env bash
# The register look-back kernel's L2 prefetch before the ticket, for the segmented scan and reduce
# by key (values and keys): every kernel test and memcheck on the keyed tests, then the kernel
# suite's keyed rows, old (the build before) and new alternating (scripts/gpu run ab), two rounds.
#   here:    scripts/gpu pack --targets "gpu_kernel_tests kernel_suite" --extra kernel_suite_old=OLD_BUILD/bin/kernel_suite
#   device:  run(command="bash bench/results/keyed-prefetch-h100-2026-11-26/run.sh", carry=[".gpu-pack"], kind="nvidia-h100-x1", timeout_s=590)
# Under $OUT: device.txt, kernel_tests.log, memcheck.log, {old,new}_{1,2}.txt, summary.txt.
source scripts/lib/gpu-common.sh
gpu_setup >/dev/null
export LD_LIBRARY_PATH=$R
step kernel tests
timeout 240 "$B/gpu_kernel_tests" --gtest_brief=1 2>&1 | tee "$out/kernel_tests.log" | tail -3
gpu_sanitize memcheck '*Segmented*:*ReduceByKey*'
OUT=$out GPU_LOGS_TGZ='' ROUNDS=2 VARIANTS="old new" bash scripts/gpu run ab --ops segmented_scan,reduce_by_key \
  --dtypes int32 --sizes 2^20,2^24,2^26,2^28,2^30
