#!/usr/bin/env bash
# ON the GPU machine (carry .gpu-pack): main / the change alternating on the deterministic scans
# (scripts/gpu-ab.sh). VARIANTS as gpu-ab.sh; logs come back as $OUT/$GPU_LOGS_TGZ (ab.tgz).
GPU_LOGS_TGZ=${GPU_LOGS_TGZ:-ab.tgz} ROUNDS=${ROUNDS:-3} VARIANTS="${VARIANTS:-main new}" bash scripts/gpu-ab.sh \
  --ops scan --algorithms deterministic --dtypes ${DTYPES:-float32,float64} --sizes ${SIZES:-2^24,2^28,2^30} 2>&1 |
  sed -n '/=== summary/,$p'
