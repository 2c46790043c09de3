#!/usr/bin/env bash
# Runs ON the GPU machine (device `run`, from the repo root): the Python package against a CUDA
# server: versions and import check, the pytest suite (if pytest is there; hypothesis optional),
# then `python -m gpuscan.bench` on 1 GiB int32 (1 MiB and 4 MiB chunks, and shared memory) beside
# the C++ CLI's e2e bench of the same run (streamed and --shm). The server has a --shm-dir. Needs, carried: .gpu-pack (scripts/gpu-check.sh: server, CLI and their
# libraries) and build/python/pkg (here: cmake --build build --target gpuscan_python).
#   run(command="bash python/tools/gpu-python.sh", carry=[".gpu-pack", "build/python/pkg"], timeout_s=590)
# Logs under $OUT: py-versions.txt, py-tests.log, py-bench-1m.{txt,json}, py-bench-4m.{txt,json},
# py-bench-native-4.{txt,json}, cli-e2e-1gib.txt, py-server.log.
set -uo pipefail
out=${OUT:-/tmp/gpuscan-out}
mkdir -p "$out"
[ -d .gpu-bin ] || tar -xJf .gpu-pack/gpu.tar.xz
py=${PYTHON:-python3}
export PYTHONPATH=$PWD/build/python/pkg PYTHONDONTWRITEBYTECODE=1
# The carried libraries only for the server and the CLI, not for Python's own modules.
wrap=$PWD/.gpu-bin/gpuscan-server-wrapped
printf '#!/bin/sh\nLD_LIBRARY_PATH=%s exec %s "$@"\n' "$PWD/.gpu-rt" "$PWD/.gpu-bin/gpuscan-server" >"$wrap"
chmod +x "$wrap"
step() { echo; echo "=== $* ==="; }

step versions
$py -c 'import sys, grpc, google.protobuf as p, numpy as n; print("python", sys.version.split()[0], "grpcio", grpc.__version__, "protobuf", p.__version__, p.__file__, "numpy", n.__version__)
from google.protobuf.internal import api_implementation as a; print("protobuf backend", a.Type())
import gpuscan, gpuscan.v1.gpuscan_pb2 as pb; print("gpuscan imports; stubs", pb.__file__)' 2>&1 | tee "$out/py-versions.txt"

port=50561
shm=/dev/shm/gpuscan-py-$$  # shared memory: the tests and the bench's shm rows use the server's directory
mkdir -p "$shm"
trap 'rm -rf "$shm"' EXIT
"$wrap" --address 127.0.0.1:$port --engine "${ENGINE:-cuda}" --shm-dir "$shm" >"$out/py-server.log" 2>&1 &
pid=$!
$py - <<PY
import time, gpuscan
with gpuscan.Client("127.0.0.1:$port", timeout=2) as c:
    for _ in range(100):
        try:
            if c.health() == "SERVING": print("server up:", c.info()["devices"]); break
        except gpuscan.Error: time.sleep(0.2)
PY

step pytest against the server
if $py -c 'import pytest' 2>/dev/null; then
  # PYTEST_ARGS (e.g. "-v") and PYTEST_PATHS (default python/tests) narrow the run; PY_TESTS_ONLY=1 skips the benches below.
  GPUSCAN_TARGET=127.0.0.1:$port GPUSCAN_SERVER=$wrap GPUSCAN_TEST_ENGINE="${ENGINE:-cuda}" timeout "${PYTEST_TIMEOUT:-300}" \
    $py -m pytest -q -p no:cacheprovider -rs ${PYTEST_ARGS:-} ${PYTEST_PATHS:-python/tests} 2>&1 | tee "$out/py-tests.log" | tail -15
else
  echo "no pytest here: skipped" | tee "$out/py-tests.log"
fi

if [ -n "${PY_TESTS_ONLY:-}" ]; then kill -TERM $pid; wait $pid; exit 0; fi
step python bench, 1 GiB int32, 1 MiB chunks
timeout 200 $py -m gpuscan.bench --target 127.0.0.1:$port --size 1GiB --json "$out/py-bench-1m.json" 2>&1 | tee "$out/py-bench-1m.txt" | tail -8
step python bench, 1 GiB int32, 4 MiB chunks
timeout 200 $py -m gpuscan.bench --target 127.0.0.1:$port --size 1GiB --chunk-bytes 4MiB --json "$out/py-bench-4m.json" 2>&1 | tee "$out/py-bench-4m.txt" | tail -8
step "python bench, 1 GiB int32, 4 lanes through the native path (its C API needs the carried libraries)"
LD_LIBRARY_PATH=$PWD/.gpu-rt timeout 200 $py -m gpuscan.bench --target 127.0.0.1:$port --size 1GiB --lanes 4 --native \
  --shared off --json "$out/py-bench-native-4.json" 2>&1 | tee "$out/py-bench-native-4.txt" | tail -8
step C++ CLI, same server, same run
[ -x .gpu-bin/gpuscan ] && LD_LIBRARY_PATH=$PWD/.gpu-rt timeout 120 .gpu-bin/gpuscan -s 127.0.0.1:$port bench --e2e --op scan --dtype int32 \
  --bytes $((1 << 30)) --concurrency 1 --requests 3 2>&1 | tee "$out/cli-e2e-1gib.txt" | tail -5
[ -x .gpu-bin/gpuscan ] && LD_LIBRARY_PATH=$PWD/.gpu-rt timeout 120 .gpu-bin/gpuscan -s 127.0.0.1:$port bench --e2e --op scan --dtype int32 \
  --bytes $((1 << 30)) --shm --check --concurrency 1 --requests 5 2>&1 | tee "$out/cli-e2e-shm-1gib.txt" | tail -5
kill -TERM $pid; wait $pid
tail -2 "$out/py-server.log"
