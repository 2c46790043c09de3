#!/usr/bin/env bash
# ON the GPU machine (carry .gpu-pack from `scripts/gpu pack --python`: gpuscan-server, gpuscan,
# their libraries and the Python package with its C API library): the whole Python suite against a cuda server of the
# final build (small scan chunks on gRPC's thread, the final response with the status), on the
# device's Python 3.12 / numpy 2.x / newer grpcio and protobuf.
source scripts/lib/gpu-common.sh && gpu_setup >/dev/null
export LD_LIBRARY_PATH=$R
port=50651
$B/gpuscan-server --address 127.0.0.1:$port --engine cuda >"$out/server.log" 2>&1 &
spid=$!
for _ in $(seq 100); do $B/gpuscan health -s 127.0.0.1:$port >/dev/null 2>&1 && break; sleep 0.2; done
printf '#!/bin/sh\nexec %s "$@"\n' "$B/gpuscan-server" >"$B/server-wrapped"
chmod +x "$B/server-wrapped"
python3 -c 'import sys, numpy, grpc, google.protobuf as p; print(sys.version.split()[0], "numpy", numpy.__version__, "grpcio", grpc.__version__, "protobuf", p.__version__)'
step "Python suite against the cuda server"
PYTHONPATH=$P PYTHONDONTWRITEBYTECODE=1 GPUSCAN_TARGET=127.0.0.1:$port GPUSCAN_TEST_ENGINE=cuda \
  GPUSCAN_SERVER=$B/server-wrapped timeout 500 python3 -m pytest -q -p no:cacheprovider -x python/tests 2>&1 \
  | tee "$out/python_tests.log" | tail -6
kill -TERM $spid; wait $spid
xz -9 "$out/server.log"
