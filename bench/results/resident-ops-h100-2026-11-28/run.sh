#!/usr/bin/env bash
# Issue 56, second step (every operation on resident arrays) on the cuda engine of one H100.
#   here:    scripts/gpu pack --build build-gpu --targets "integration_tests gpuscan-server kernel_suite" --python
#   device:  run(command="bash bench/results/resident-ops-h100-2026-11-28/run.sh", carry=[".gpu-pack"], kind="nvidia-h100-x1", timeout_s=590)
# Writes integration_cuda.txt (every integration suite on the cuda engine, the resident ones
# included), resident_ops.json (resident_ops_bench.py: each operation on a resident 1 GiB int32
# array and the compact -> scan -> reduce chain, beside CuPy in process), spill.json
# (spill_bench.py: reduces that swap two 1 GiB arrays through pinned host memory) and kernel_suite.txt
# (the same operations' kernels alone on 2^28 int32, the same run).
source scripts/lib/gpu-common.sh
gpu_setup
here=bench/results/resident-ops-h100-2026-11-28
step integration suites on the cuda engine
LD_LIBRARY_PATH=$R GPUSCAN_TEST_ENGINE=cuda timeout 240 $B/integration_tests --gtest_brief=1 2>&1 | grep -v '\[info\]' \
  | tee "$out/integration_cuda.txt" | tail -8
step every operation on a resident 1 GiB int32 array, against CuPy in process
gpu_server resident 127.0.0.1:50891 --engine cuda --resident-bytes $((12 << 30))
PYTHONPATH=$P PYTHONDONTWRITEBYTECODE=1 timeout 240 python3 $here/resident_ops_bench.py 127.0.0.1:50891 $((1 << 28)) \
  "$out/resident_ops.json"
gpu_stop resident
step spill and restore of 1 GiB arrays: a budget of two arrays less one element
gpu_server spill 127.0.0.1:50892 --engine cuda --resident-bytes $(((2 << 30) - 4)) --spill-bytes $((4 << 30))
PYTHONPATH=$P PYTHONDONTWRITEBYTECODE=1 timeout 200 python3 $here/spill_bench.py 127.0.0.1:50892 $((1 << 28)) \
  "$out/spill.json"
gpu_stop spill
step the kernel suite: the same operations on int32 2^28
LD_LIBRARY_PATH=$R timeout 120 $B/kernel_suite --ops scan,reduce,compact,histogram,segmented_scan,sort --dtypes int32 \
  --sizes 2^28 2>&1 | tee "$out/kernel_suite.txt" | tail -14
exit 0
