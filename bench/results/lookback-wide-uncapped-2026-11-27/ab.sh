#!/usr/bin/env bash
# ON the GPU machine (carry .gpu-pack: kernel_suite with uncapped.diff, kernel_suite_main of
# dbf4d0c): main / new alternating on the look-back scan's 4-byte rows (scripts/gpu-ab.sh).
GPU_LOGS_TGZ=${GPU_LOGS_TGZ:-ab.tgz} ROUNDS=${ROUNDS:-3} bash scripts/gpu-ab.sh --ops scan \
  --algorithms decoupled_lookback --dtypes int32,float32 --sizes ${SIZES:-2^26,2^28,2^30} 2>&1 | sed -n '/=== summary/,$p'
