#!/usr/bin/env bash
# The committed build (BulkScanTuning::Wide from 2^26 elements on GPUs of more than 4000 GB/s):
# the same checks and two kernel-suite rounds as lookback-tiles-2026-11-26/run.sh, which this runs.
# Made final-h200/ (on the build of its day, Wide = 128 x 36).
#   here:    scripts/gpu pack --targets "gpu_kernel_tests kernel_suite"
#   device:  run(command="GPU_LOGS_TGZ=logs.tgz bash bench/results/lookback-shapes-2026-11-26/run.sh", carry=[".gpu-pack"], kind="nvidia-h200", timeout_s=590)
exec bash bench/results/lookback-tiles-2026-11-26/run.sh "$@"
