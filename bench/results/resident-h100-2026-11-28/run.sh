#!/usr/bin/env bash
# Issue 56, first step (resident arrays: PutArray/GetArray/DropArray/ListArrays, Scan and Reduce
# on resident inputs) on the cuda engine of one H100.
#   here:    scripts/gpu pack --build build-gpu --targets "integration_tests gpuscan-server kernel_suite" --python
#   device:  run(command="bash bench/results/resident-h100-2026-11-28/run.sh", carry=[".gpu-pack"], kind="nvidia-h100-x1", timeout_s=590)
# Writes integration_cuda.txt (every integration suite on the cuda engine, the resident ones
# included), resident.json (resident_bench.py: the targets' figures beside CuPy in process) and
# client.json (client_bench.py: the same calls through the gpuscan package) and kernel_suite.txt
# (the scan kernel and a device copy of the same 1 GiB, the same run).
source scripts/lib/gpu-common.sh
gpu_setup
here=bench/results/resident-h100-2026-11-28
step integration suites on the cuda engine
LD_LIBRARY_PATH=$R GPUSCAN_TEST_ENGINE=cuda timeout 200 $B/integration_tests --gtest_brief=1 2>&1 | grep -v '\[info\]' \
  | tee "$out/integration_cuda.txt" | tail -6
step resident arrays against CuPy in process, 1 GiB int32
gpu_server resident 127.0.0.1:50890 --engine cuda --resident-bytes $((8 << 30))
PYTHONPATH=$P PYTHONDONTWRITEBYTECODE=1 timeout 240 python3 $here/resident_bench.py 127.0.0.1:50890 $((1 << 28)) \
  "$out/resident.json"
step the same through the gpuscan package, Client and AsyncClient
PYTHONPATH=$P PYTHONDONTWRITEBYTECODE=1 timeout 200 python3 $here/client_bench.py 127.0.0.1:50890 $((1 << 28)) \
  "$out/client.json"
gpu_stop resident
step the kernel suite: scan int32 2^28 beside a device copy
LD_LIBRARY_PATH=$R timeout 120 $B/kernel_suite --ops scan --dtypes int32 --sizes 2^28 2>&1 | tee "$out/kernel_suite.txt" | tail -8
exit 0
