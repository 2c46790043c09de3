#!/usr/bin/env bash
# Runs ON the GPU machine (device `run`, repo root): issue 13's fused segmented scan and reduce
# by key. Kernel tests (every key kind, sizes around tiles, calls chained and split over
# launches) plain and under compute-sanitizer memcheck; the plain scan and compaction kernel
# tests (they share the refactored single-pass kernel); engine tests (CPU and CUDA bits equal);
# typed RPCs and the bad-input matrix on the cuda engine; the kernel suite (fused against CUB's
# InclusiveScanByKey and ReduceByKey; the plain scan against CUB, to show the refactor cost
# nothing); the Python segmented and reduce-by-key tests against a cuda server. Needs, carried:
# .gpu-pack (scripts/gpu-check.sh) and .gpu-small/pkg (optional, as scripts/gpu-scan2d.sh says).
#   run(command="bash scripts/gpu-segmented.sh", carry=[".gpu-pack", ".gpu-small"], timeout_s=590)
# PART=service runs only the engine, integration and Python steps.
# Logs under $OUT: device.txt, kernel.log, sanitizer.log, engine.log, integration.log,
# ks_segmented.{txt,json}, ks_rbk.{txt,json}, ks_scan.{txt,json}, py-segmented.log.
source "$(dirname "$0")/gpu-common.sh"
if [ "${PART:-all}" != service ]; then
step kernel tests: segmented, reduce by key, scan, compaction
timeout 200 $B/gpu_kernel_tests --gtest_brief=1 --gtest_filter='SegmentedScan*:ReduceByKey*:*ScanTest*:*Compact*' 2>&1 \
  | tee "$out/kernel.log" | tail -6
step compute-sanitizer memcheck: segmented and reduce-by-key kernel tests
san=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
if [ -x "$san" ]; then
  timeout 150 "$san" --tool memcheck --error-exitcode 9 $B/gpu_kernel_tests --gtest_brief=1 \
    --gtest_filter='SegmentedScan*:ReduceByKey*' >"$out/sanitizer.log" 2>&1
  echo "memcheck exit $?"; tail -4 "$out/sanitizer.log"
else
  echo "compute-sanitizer not found" | tee "$out/sanitizer.log"
fi
fi
step CUDA engine tests: segmented scan, reduce by key
LD_LIBRARY_PATH=$R timeout 200 $B/gpu_engine_tests --gtest_brief=1 --gtest_filter='*Segmented*:*ReduceByKey*' 2>&1 \
  | tee "$out/engine.log" | tail -6
if [ "${PART:-all}" != service ]; then
step kernel suite: segmented scan against CUB InclusiveScanByKey
timeout 120 $B/kernel_suite --ops segmented_scan --dtypes int32 --sizes 2^16,2^20,2^24,2^26,2^28,2^30 \
  --json "$out/ks_segmented.json" >"$out/ks_segmented.txt" 2>&1
grep segmented_scan "$out/ks_segmented.txt" | grep -v '^copy'
step kernel suite: reduce by key against CUB ReduceByKey
timeout 120 $B/kernel_suite --ops reduce_by_key --dtypes int32 --sizes 2^16,2^20,2^24,2^26,2^28,2^30 \
  --json "$out/ks_rbk.json" >"$out/ks_rbk.txt" 2>&1
grep reduce_by_key "$out/ks_rbk.txt" | grep -v '^copy'
step kernel suite: plain scan against CUB
timeout 120 $B/kernel_suite --ops scan --dtypes int32,float32,int64 --sizes 2^16,2^24,2^28 \
  --json "$out/ks_scan.json" >"$out/ks_scan.txt" 2>&1
grep -E 'decoupled|cub' "$out/ks_scan.txt" | grep -v '^copy' | head -20
fi
step typed RPCs and the bad-input matrix on the cuda engine
GPUSCAN_TEST_ENGINE=cuda LD_LIBRARY_PATH=$R timeout 200 $B/integration_tests --gtest_brief=1 \
  --gtest_filter='*Segmented*:*ReduceByKey*:*BadInputMatrix*' 2>&1 | grep -v '\[info\]' \
  | grep -v ' -> ' | tee "$out/integration.log" | tail -6
if [ -d .gpu-small/pkg ]; then
  printf '#!/bin/sh\nLD_LIBRARY_PATH=%s exec %s "$@"\n' "$R" "$B/gpuscan-server" >"$B/server-wrapped"
  chmod +x "$B/server-wrapped"
  "$B/server-wrapped" --address 127.0.0.1:50572 --engine cuda >"$out/server.log" 2>&1 &
  pid=$!
  sleep 2
  step Python against the cuda server: segmented scan and reduce by key
  export PYTHONPATH=$PWD/.gpu-small/pkg PYTHONDONTWRITEBYTECODE=1
  GPUSCAN_TARGET=127.0.0.1:50572 GPUSCAN_SERVER="$B/server-wrapped" GPUSCAN_TEST_ENGINE=cuda timeout 150 \
    python3 -m pytest -q -p no:cacheprovider python/tests/test_segmented.py python/tests/test_reduce_by_key.py 2>&1 \
    | tee "$out/py-segmented.log" | tail -4
  kill -TERM $pid; wait $pid
fi
