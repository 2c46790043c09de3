# scripts/gpu run python: the Python package against a CUDA server: versions and import check, the
# pytest suite (if pytest is there; hypothesis optional), then `python -m gpuscan.bench` on 1 GiB
# int32 (1 MiB and 4 MiB chunks, and 4 lanes through the native path) beside the C++ CLI's e2e
# bench of the same run (streamed and --shm). The server has a --shm-dir. Pack with --python.
#   PYTHON (default python3), ENGINE (default cuda), PYTEST_ARGS (e.g. "-v"), PYTEST_PATHS (default
#   python/tests), PYTEST_TIMEOUT (300), PY_TESTS_ONLY=1 skips the benches.
# Logs: py-versions.txt, py-tests.log, py-bench-1m.{txt,json}, py-bench-4m.{txt,json},
# py-bench-native-4.{txt,json}, cli-e2e-1gib.txt, cli-e2e-shm-1gib.txt, server_py.log.
source scripts/lib/gpu-common.sh
gpu_setup
py=${PYTHON:-python3}
# The carried libraries only for the server, the CLI and the native path, not for Python's own modules.
export PYTHONPATH=$P PYTHONDONTWRITEBYTECODE=1

step versions
$py -c 'import sys, grpc, google.protobuf as p, numpy as n; print("python", sys.version.split()[0], "grpcio", grpc.__version__, "protobuf", p.__version__, p.__file__, "numpy", n.__version__)
from google.protobuf.internal import api_implementation as a; print("protobuf backend", a.Type())
import gpuscan, gpuscan.v1.gpuscan_pb2 as pb; print("gpuscan imports; stubs", pb.__file__)' 2>&1 | tee "$out/py-versions.txt"

port=50561
shm=/dev/shm/gpuscan-py-$$  # shared memory: the tests and the bench's shm rows use the server's directory
mkdir -p "$shm"
gpu_at_exit "rm -rf '$shm'"
gpu_server py 127.0.0.1:$port --engine "${ENGINE:-cuda}" --shm-dir "$shm"

step pytest against the server
if $py -c 'import pytest' 2>/dev/null; then
  GPUSCAN_TARGET=127.0.0.1:$port GPUSCAN_SERVER_BIN="$(gpu_wrapped_server)" GPUSCAN_TEST_ENGINE="${ENGINE:-cuda}" \
    timeout "${PYTEST_TIMEOUT:-300}" $py -m pytest -q -p no:cacheprovider -rs ${PYTEST_ARGS:-} ${PYTEST_PATHS:-python/tests} 2>&1 \
    | tee "$out/py-tests.log" | tail -15
else
  echo "no pytest here: skipped" | tee "$out/py-tests.log"
fi

[ -n "${PY_TESTS_ONLY:-}" ] && exit 0
step python bench, 1 GiB int32, 1 MiB chunks
timeout 200 $py -m gpuscan.bench --target 127.0.0.1:$port --size 1GiB --json "$out/py-bench-1m.json" 2>&1 | tee "$out/py-bench-1m.txt" | tail -8
step python bench, 1 GiB int32, 4 MiB chunks
timeout 200 $py -m gpuscan.bench --target 127.0.0.1:$port --size 1GiB --chunk-bytes 4MiB --json "$out/py-bench-4m.json" 2>&1 | tee "$out/py-bench-4m.txt" | tail -8
step "python bench, 1 GiB int32, 4 lanes through the native path (its C API needs the carried libraries)"
LD_LIBRARY_PATH=$R timeout 200 $py -m gpuscan.bench --target 127.0.0.1:$port --size 1GiB --lanes 4 --native \
  --shared off --json "$out/py-bench-native-4.json" 2>&1 | tee "$out/py-bench-native-4.txt" | tail -8
if [ -x "$B/gpuscan" ]; then
  step C++ CLI, same server, same run
  G="env LD_LIBRARY_PATH=$R $B/gpuscan -s 127.0.0.1:$port"
  timeout 120 $G bench --e2e --op scan --dtype int32 --bytes $((1 << 30)) --concurrency 1 --requests 3 2>&1 \
    | tee "$out/cli-e2e-1gib.txt" | tail -5
  timeout 120 $G bench --e2e --op scan --dtype int32 --bytes $((1 << 30)) --shm --check --concurrency 1 --requests 5 2>&1 \
    | tee "$out/cli-e2e-shm-1gib.txt" | tail -5
fi
gpu_stop py
tail -2 "$out/server_py.log"
