#!/usr/bin/env bash
# ON the GPU machine: the hint form (loads waited for as commit groups; the mbarriers only say
# whether t2 is in). kernel_suite_k1 / (new) / _k4: 1 / 2 / 4 looks for the carry before the
# block decides; main: before the change. Logs come back as $OUT/looks.tgz.
GPU_LOGS_TGZ=looks.tgz ROUNDS=${ROUNDS:-3} VARIANTS="${VARIANTS:-main k1 new k4}" bash scripts/gpu-ab.sh \
  --ops scan --algorithms deterministic --dtypes float32 --sizes ${SIZES:-2^24,2^28,2^30} 2>&1 | sed -n '/=== summary/,$p'
