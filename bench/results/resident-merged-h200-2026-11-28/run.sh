#!/usr/bin/env bash
# Issue 56's last steps on one H200: every integration suite on the cuda engine (narrow Compact
# and Sort on resident arrays, narrow, ReduceByKey and Scan2D pipeline stages, ListArrays pages),
# the Python resident family against a cuda server, Put and Get through shared and device memory
# (put_get_bench.py, the Put timed alone too), and the C++ client's latency of calls on a
# resident array (`gpuscan bench --e2e --resident`: 1K elements, and a 1 GiB reduce) beside one unary call.
#   here:    scripts/gpu pack --build build-gpu --targets "integration_tests gpuscan-server gpuscan" --python
#   device:  run(command="bash bench/results/resident-merged-h200-2026-11-28/run.sh", carry=[".gpu-pack/gpu.tar.xz"], kind="nvidia-h200")
source scripts/lib/gpu-common.sh
gpu_setup
export PYTHONPATH=$P PYTHONDONTWRITEBYTECODE=1
# RS_STEPS: any of integration, python, putget, latency (default all).
want() { [[ ",${RS_STEPS:-integration,python,putget,latency}," == *",$1,"* ]]; }
want integration && step integration suites on the cuda engine && \
LD_LIBRARY_PATH=$R GPUSCAN_TEST_ENGINE=cuda timeout 300 $B/integration_tests --gtest_brief=1 2>&1 | grep -v '\[info\]' \
  | tee "$out/integration_cuda.txt" | tail -6
port=50571
mkdir -p /dev/shm/gpuscan-bench
gpu_server rs 127.0.0.1:$port --engine cuda --resident-bytes $((16 << 30)) --shm-dir /dev/shm/gpuscan-bench --allow-device-ipc
want putget && step "Put and Get of 1 GiB int32 through shared and device memory (the Put alone and with its Drop)" && \
timeout 200 python3 bench/results/pipeline-h200-2026-11-28/put_get_bench.py 127.0.0.1:$port /dev/shm/gpuscan-bench \
  $((1 << 28)) "$out/put_get.json" | tail -20
want python && step Python resident family against the cuda server && \
GPUSCAN_TARGET=127.0.0.1:$port GPUSCAN_SERVER_BIN="$(gpu_wrapped_server)" GPUSCAN_TEST_ENGINE=cuda \
  timeout 240 python3 -m pytest -q -p no:cacheprovider -rs python/tests/test_resident.py python/tests/test_resident_ops.py \
  python/tests/test_pipeline.py 2>&1 | tee "$out/py-resident.txt" | tail -6
G="env LD_LIBRARY_PATH=$R $B/gpuscan -s 127.0.0.1:$port"
want latency && for op in scan reduce compact; do
  step "C++ client, $op of a resident 1K int32 array, concurrency 1 and 4"
  timeout 120 $G bench --e2e --op $op --elements 1024 --resident --check --concurrency 1,4 --requests 3000 \
    --json "$out/latency_1k_$op.json" 2>&1 | tee "$out/latency_1k_$op.txt" | tail -4
done
want latency && step "C++ client, reduce of a resident 1 GiB int32 array" && \
timeout 120 $G bench --e2e --op reduce --bytes $((1 << 30)) --resident --concurrency 1 --requests 50 \
  --json "$out/gib_reduce.json" 2>&1 | tee "$out/gib_reduce.txt" | tail -3
gpu_stop rs
exit 0
