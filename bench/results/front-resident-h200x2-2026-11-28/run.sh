#!/usr/bin/env bash
# Issue 56: resident arrays behind the front of worker processes (--isolate-devices, the default
# on two GPUs), on two H200s.
#   here:    scripts/gpu pack --build build-gpu --targets "isolation_tests gpuscan-server" --python  (carry .gpu-pack/gpu.tar.xz only)
#   device:  run(command="bash bench/results/front-resident-h200x2-2026-11-28/run.sh", carry=[".gpu-pack/gpu.tar.xz"], kind="nvidia-h200-x2", timeout_s=590)
# Writes py_device_put.txt (python/tests/test_device_ipc_put.py and its neighbours on a GPU),
# isolation_cuda.txt (tests/isolation/front_resident_test.cc with cuda workers on devices 0
# and 1) and front.json (front_bench.py: the same resident calls through the front and through one
# process serving both devices, in the same run).
source scripts/lib/gpu-common.sh
gpu_setup
here=bench/results/front-resident-h200x2-2026-11-28
step the front resident tests with cuda workers on devices 0 and 1
LD_LIBRARY_PATH=$R GPUSCAN_BIN_DIR=$B GPUSCAN_TEST_ENGINE=cuda timeout 200 $B/isolation_tests --gtest_brief=1 \
  --gtest_filter='FrontResident*' 2>&1 | grep -v '\[info\]' | tee "$out/isolation_cuda.txt" | tail -8
step resident calls through the front and through one process of both devices
gpu_server front 127.0.0.1:50894 --engine cuda --devices 0,1 --isolate-devices on --resident-bytes $((12 << 30))
gpu_server inproc 127.0.0.1:50895 --engine cuda --devices 0,1 --isolate-devices off --resident-bytes $((12 << 30))
PYTHONPATH=$P PYTHONDONTWRITEBYTECODE=1 timeout 300 python3 $here/front_bench.py 127.0.0.1:50894 127.0.0.1:50895 \
  $((1 << 26)) "$out/front.json"
gpu_stop front
gpu_stop inproc
step "Python: c.put of CuPy arrays by device memory (and the device-memory suites beside it)"
PYTHONPATH=$P PYTHONDONTWRITEBYTECODE=1 GPUSCAN_SERVER_BIN="$(gpu_wrapped_server)" GPUSCAN_TEST_ENGINE=cuda timeout 240 \
  python3 -m pytest -q -p no:cacheprovider -rs python/tests/test_device_ipc_put.py python/tests/test_device_ipc_client.py \
  python/tests/test_resident.py 2>&1 | tee "$out/py_device_put.txt" | tail -8
exit 0
