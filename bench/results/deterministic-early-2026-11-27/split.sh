#!/usr/bin/env bash
# ON the GPU machine: which part of the change costs. kernel_suite_e0: the loads waited for through
# the mbarriers only; _e1: plus phase 2's wait in rounds (one look, a block vote) but never taking
# t2 early; new: the whole change; main: before it.
ROUNDS=${ROUNDS:-3} VARIANTS="main e0 e1 new" bash scripts/gpu-ab.sh --ops scan --algorithms deterministic \
  --dtypes float32 --sizes ${SIZES:-2^24,2^28,2^30}
