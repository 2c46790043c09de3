#!/usr/bin/env bash
# Runs ON the GPU machine (device `run`, repo root): the segmented scan's CUDA checks and kernel
# numbers, the bad-input matrix and typed RPCs on the cuda engine, and the Python client's
# segmented tests plus the one-stream bench with the do-it-yourself peer (issue 12). Needs,
# carried: .gpu-pack (scripts/gpu-check.sh) and .gpu-small/pkg (a copy of build/python/pkg
# without the C API .so).
#   run(command="bash scripts/gpu-segmented.sh", carry=[".gpu-pack", ".gpu-small"], timeout_s=500)
# Logs under $OUT: device.txt, engine.log, integration.log, ks_seg.{txt,json}, py-segmented.log,
# py-bench.{txt,json}.
set -uo pipefail
out=${OUT:-/tmp/gpuscan-out}
mkdir -p "$out"
[ -d .gpu-bin ] || tar -xJf .gpu-pack/gpu.tar.xz
B=$PWD/.gpu-bin R=$PWD/.gpu-rt
step() { echo; echo "=== $* ==="; }
nvidia-smi -L | tee "$out/device.txt"
step CUDA engine segmented scan tests
LD_LIBRARY_PATH=$R timeout 200 $B/gpu_engine_tests --gtest_brief=1 --gtest_filter='*Segmented*:*Histogram*' 2>&1 \
  | tee "$out/engine.log" | tail -6
step typed RPCs and the bad-input matrix on the cuda engine
GPUSCAN_TEST_ENGINE=cuda LD_LIBRARY_PATH=$R timeout 200 $B/integration_tests --gtest_brief=1 \
  --gtest_filter='*Segmented*:*BadInputMatrix*:*ServerInfo*' 2>&1 | grep -v '\[info\]' \
  | grep -v ' -> ' | tee "$out/integration.log" | tail -6
step kernel suite: segmented scan by keys against CUB InclusiveScanByKey
timeout 90 $B/kernel_suite --ops segmented_scan --dtypes int32 --sizes 2^16,2^20,2^24,2^28 --json "$out/ks_seg.json" \
  >"$out/ks_seg.txt" 2>&1
tail -16 "$out/ks_seg.txt"
step Python against the cuda server: segmented tests, then one stream of 1 GiB with the peer
printf '#!/bin/sh\nLD_LIBRARY_PATH=%s exec %s "$@"\n' "$R" "$B/gpuscan-server" >"$B/server-wrapped"
chmod +x "$B/server-wrapped"
"$B/server-wrapped" --address 127.0.0.1:50571 --engine cuda >"$out/py-server.log" 2>&1 &
pid=$!
export PYTHONPATH=$PWD/.gpu-small/pkg PYTHONDONTWRITEBYTECODE=1
sleep 2
GPUSCAN_TARGET=127.0.0.1:50571 GPUSCAN_SERVER="$B/server-wrapped" GPUSCAN_TEST_ENGINE=cuda timeout 120 \
  python3 -m pytest -q -p no:cacheprovider python/tests/test_segmented.py 2>&1 | tee "$out/py-segmented.log" | tail -4
timeout 150 python3 -m gpuscan.bench --target 127.0.0.1:50571 --size 1GiB --repeat 2 --shared off --peer on \
  --json "$out/py-bench.json" >"$out/py-bench.txt" 2>&1
cat "$out/py-bench.txt" | tail -20
kill -TERM $pid; wait $pid
