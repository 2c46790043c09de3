#!/usr/bin/env bash
# Issue 13's primitives (segmented scan, reduce by key, sort, histogram) on the CUDA engine: engine
# tests, typed RPCs and the bad-input matrix on the cuda engine, kernel suite rows against CUB, and
# the Python client's tests for them against a cuda server; PY_BENCH=1 adds the Python one-stream
# bench with the do-it-yourself peer (issue 12).
#   here:    scripts/gpu pack --python
#   device:  run(command="PY_BENCH=1 bash bench/results/segmented-h100-2026-11-23/run.sh", carry=[".gpu-pack"], timeout_s=500)
# Logs: device.txt, engine.log, integration.log, ks_seg.{txt,json}, ks_sort.{txt,json},
# py-primitives.log, py-bench.{txt,json} in $OUT/primitives-logs.tgz.
source scripts/lib/gpu-common.sh
GPU_LOGS_TGZ=${GPU_LOGS_TGZ-primitives-logs.tgz} gpu_setup
step CUDA engine tests: segmented scan, sort, histogram
LD_LIBRARY_PATH=$R timeout 200 $B/gpu_engine_tests --gtest_brief=1 --gtest_filter='*Segmented*:*Sort*:*Histogram*' 2>&1 \
  | tee "$out/engine.log" | tail -6
step typed RPCs and the bad-input matrix on the cuda engine
GPUSCAN_TEST_ENGINE=cuda LD_LIBRARY_PATH=$R timeout 200 $B/integration_tests --gtest_brief=1 \
  --gtest_filter='*Segmented*:*ReduceByKey*:*Sort*:*BadInputMatrix*:*ServerInfo*' 2>&1 | grep -v '\[info\]' \
  | grep -v ' -> ' | tee "$out/integration.log" | tail -6
step kernel suite: segmented scan by keys against CUB InclusiveScanByKey
timeout 90 $B/kernel_suite --ops segmented_scan --dtypes int32 --sizes 2^16,2^20,2^24,2^28 --json "$out/ks_seg.json" \
  >"$out/ks_seg.txt" 2>&1
tail -16 "$out/ks_seg.txt"
step kernel suite: sort against CUB DeviceRadixSort::SortKeys
timeout 120 $B/kernel_suite --ops sort --dtypes uint32,uint64 --sizes 2^16,2^20,2^24,2^27,2^28 --json "$out/ks_sort.json" \
  >"$out/ks_sort.txt" 2>&1
tail -18 "$out/ks_sort.txt"
step Python against the cuda server: segmented, reduce-by-key and sort tests
gpu_server py 127.0.0.1:50571 --engine cuda
GPUSCAN_TARGET=127.0.0.1:50571 gpu_pytest 120 python/tests/test_segmented.py python/tests/test_reduce_by_key.py \
  python/tests/test_sort.py 2>&1 | tee "$out/py-primitives.log" | tail -4
if [ "${PY_BENCH:-0}" = 1 ]; then
  PYTHONPATH=$P PYTHONDONTWRITEBYTECODE=1 timeout 150 python3 -m gpuscan.bench --target 127.0.0.1:50571 --size 1GiB \
    --repeat 2 --shared off --peer on --json "$out/py-bench.json" >"$out/py-bench.txt" 2>&1
  tail -20 "$out/py-bench.txt"
fi
gpu_stop py
