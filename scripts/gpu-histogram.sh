#!/usr/bin/env bash
# Runs ON the GPU machine (device `run`, repo root): the histogram's CUDA checks and numbers, the
# deterministic scan's kernel cost, and the Python client's one stream. Needs, carried: .gpu-pack
# (scripts/gpu-check.sh) and .gpu-small/pkg (a copy of build/python/pkg without the C API .so).
#   run(command="bash scripts/gpu-histogram.sh", carry=[".gpu-pack", ".gpu-small"], timeout_s=400)
# Logs under $OUT: device.txt, engine.log, integration.log, ks_hist.{txt,json}, ks_det.{txt,json},
# py-histogram.log, py-bench.{txt,json}.
source "$(dirname "$0")/gpu-common.sh"
step CUDA engine histogram tests
LD_LIBRARY_PATH=$R timeout 150 $B/gpu_engine_tests --gtest_brief=1 --gtest_filter='*Histogram*' 2>&1 | tee "$out/engine.log" | tail -4
step typed RPC histogram tests on the cuda engine
GPUSCAN_TEST_ENGINE=cuda LD_LIBRARY_PATH=$R timeout 100 $B/integration_tests --gtest_brief=1 \
  --gtest_filter='*Histogram*:*ServerInfo*' 2>&1 | grep -v '\[info\]' | tee "$out/integration.log" | tail -4
step kernel suite: histogram
timeout 90 $B/kernel_suite --ops histogram --dtypes float32 --sizes 2^16,2^20,2^24,2^28 --json "$out/ks_hist.json" \
  >"$out/ks_hist.txt" 2>&1
tail -14 "$out/ks_hist.txt"
step kernel suite: deterministic scan against the look-back
timeout 90 $B/kernel_suite --ops scan --algorithms deterministic,decoupled_lookback --dtypes float32,float64 \
  --sizes 2^20,2^24,2^28 --json "$out/ks_det.json" >"$out/ks_det.txt" 2>&1
tail -16 "$out/ks_det.txt"
step Python against the cuda server: histogram tests, then one stream of 1 GiB
printf '#!/bin/sh\nLD_LIBRARY_PATH=%s exec %s "$@"\n' "$R" "$B/gpuscan-server" >"$B/server-wrapped"
chmod +x "$B/server-wrapped"
"$B/server-wrapped" --address 127.0.0.1:50571 --engine cuda >"$out/py-server.log" 2>&1 &
pid=$!
export PYTHONPATH=$PWD/.gpu-small/pkg PYTHONDONTWRITEBYTECODE=1
sleep 2
GPUSCAN_TARGET=127.0.0.1:50571 GPUSCAN_SERVER="$B/server-wrapped" GPUSCAN_TEST_ENGINE=cuda timeout 120 \
  python3 -m pytest -q -p no:cacheprovider python/tests/test_histogram.py python/tests/test_streaming.py 2>&1 \
  | tee "$out/py-histogram.log" | tail -4
timeout 90 python3 -m gpuscan.bench --target 127.0.0.1:50571 --size 1GiB --repeat 2 --shared off \
  --json "$out/py-bench.json" 2>&1 | tee "$out/py-bench.txt" | tail -8
kill -TERM $pid; wait $pid
