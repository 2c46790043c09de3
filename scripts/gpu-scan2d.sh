#!/usr/bin/env bash
# Runs ON the GPU machine (device `run`, repo root): issue 13's 2-D scan (summed-area table) and
# histogram on the CUDA engine: engine tests, typed RPCs and the bad-input matrix on the cuda
# engine, the kernel suite (scan2d against the device copy, histogram against CUB), the CLI end to
# end, and the Python client's tests against a cuda server. Needs, carried: .gpu-pack (scripts/gpu-check.sh) and .gpu-small/pkg (a
# copy of build/python/pkg without the C API .so; optional: the Python step is skipped without it).
#   run(command="bash scripts/gpu-scan2d.sh", carry=[".gpu-pack", ".gpu-small"], timeout_s=500)
# Logs under $OUT: device.txt, engine.log, integration.log, ks_scan2d.{txt,json},
# ks_histogram.{txt,json}, cli.txt, py-scan2d.log.
source "$(dirname "$0")/gpu-common.sh"
step CUDA engine tests: 2-D scan, histogram
LD_LIBRARY_PATH=$R timeout 200 $B/gpu_engine_tests --gtest_brief=1 --gtest_filter='*Scan2D*:*Histogram*' 2>&1 \
  | tee "$out/engine.log" | tail -6
step kernel suite: 2-D scan against the device copy
timeout 150 $B/kernel_suite --ops scan2d --dtypes float32,int32,float64 --sizes 2^20,2^24,2^26,2^28 \
  --json "$out/ks_scan2d.json" >"$out/ks_scan2d.txt" 2>&1
tail -20 "$out/ks_scan2d.txt"
step kernel suite: histogram against CUB HistogramEven
timeout 90 $B/kernel_suite --ops histogram --dtypes float32 --sizes 2^16,2^20,2^22,2^24,2^26,2^28 \
  --json "$out/ks_histogram.json" >"$out/ks_histogram.txt" 2>&1
grep histogram "$out/ks_histogram.txt" | grep -v '^copy'
step typed RPCs and the bad-input matrix on the cuda engine
GPUSCAN_TEST_ENGINE=cuda LD_LIBRARY_PATH=$R timeout 200 $B/integration_tests --gtest_brief=1 \
  --gtest_filter='*Scan2D*:*Histogram*:*BadInputMatrix*:*ServerInfo*' 2>&1 | grep -v '\[info\]' \
  | grep -v ' -> ' | tee "$out/integration.log" | tail -6
printf '#!/bin/sh\nLD_LIBRARY_PATH=%s exec %s "$@"\n' "$R" "$B/gpuscan-server" >"$B/server-wrapped"
chmod +x "$B/server-wrapped"
"$B/server-wrapped" --address 127.0.0.1:50571 --engine cuda >"$out/server.log" 2>&1 &
pid=$!
sleep 2
step CLI: a 4096 x 4096 float32 table through the cuda server, checked with numpy
python3 - <<'PY'
import numpy as np
rng = np.random.default_rng(7)
np.save("/tmp/m.npy", (rng.standard_normal((4096, 4096)) * 100).astype(np.float32))
PY
LD_LIBRARY_PATH=$R $B/gpuscan --server 127.0.0.1:50571 --no-progress scan2d -i /tmp/m.npy -o /tmp/sat.npy 2>&1 \
  | tee "$out/cli.txt" | tail -12
python3 - <<'PY' 2>&1 | tee -a "$out/cli.txt"
import numpy as np
x, s = np.load("/tmp/m.npy"), np.load("/tmp/sat.npy")
ref = np.cumsum(np.cumsum(x, axis=1, dtype=np.float32), axis=0, dtype=np.float32)
print("cli scan2d", s.shape, "bit-exact vs numpy double loop:", np.array_equal(ref.view(np.uint32), s.view(np.uint32)))
PY
if [ -d .gpu-small/pkg ]; then
  step Python against the cuda server: scan2d and histogram tests
  export PYTHONPATH=$PWD/.gpu-small/pkg PYTHONDONTWRITEBYTECODE=1
  GPUSCAN_TARGET=127.0.0.1:50571 GPUSCAN_SERVER="$B/server-wrapped" GPUSCAN_TEST_ENGINE=cuda timeout 120 \
    python3 -m pytest -q -p no:cacheprovider python/tests/test_scan2d.py python/tests/test_histogram.py 2>&1 | tee "$out/py-scan2d.log" | tail -4
fi
kill -TERM $pid; wait $pid
