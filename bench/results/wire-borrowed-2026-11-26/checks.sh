#!/usr/bin/env bash
# ON the GPU machine (carry .gpu-pack: integration_tests, gpuscan-server, gpuscan and their
# libraries; `scripts/gpu pack --python`: the Python package with its C API library): the borrowed-slices
# client on the cuda engine: every RPC suite, then Python's native (C API), lanes and retries
# suites against a cuda server.
source scripts/lib/gpu-common.sh && gpu_setup >/dev/null
export LD_LIBRARY_PATH=$R
step integration suites on the cuda engine
GPUSCAN_TEST_ENGINE=cuda timeout 300 $B/integration_tests --gtest_brief=1 2>&1 | grep -v '\[info\]' | tee "$out/integration_cuda.log" | tail -4
port=50651
$B/gpuscan-server --address 127.0.0.1:$port --engine cuda >"$out/server.log" 2>&1 &
spid=$!
for _ in $(seq 100); do $B/gpuscan health -s 127.0.0.1:$port >/dev/null 2>&1 && break; sleep 0.2; done
step Python native, lanes, retries and client suites against the cuda server
printf '#!/bin/sh\nexec %s "$@"\n' "$B/gpuscan-server" >"$B/server-wrapped"
chmod +x "$B/server-wrapped"
PYTHONPATH=$P PYTHONDONTWRITEBYTECODE=1 GPUSCAN_TARGET=127.0.0.1:$port GPUSCAN_TEST_ENGINE=cuda \
  GPUSCAN_SERVER=$B/server-wrapped timeout 240 python3 -m pytest -q -p no:cacheprovider python/tests/test_native.py \
  python/tests/test_lanes.py python/tests/test_retries.py python/tests/test_client.py 2>&1 | tee "$out/python_tests.log" | tail -4
kill -TERM $spid; wait $spid
