#!/usr/bin/env bash
# The merged tree on one H200: every integration suite on the cuda engine (the pipeline clients',
# Put/Get through shared memory included), Put/Get through shared and device memory
# (put_get_bench.py), and 100,000 resident arrays (../resident-scale-h200-2026-11-28).
#   here:    scripts/gpu pack --build build-gpu --targets "integration_tests gpuscan-server" --python
#   device:  run(command="bash bench/results/pipeline-h200-2026-11-28/run_put_get.sh", carry=[".gpu-pack/gpu.tar.xz"], kind="nvidia-h200")
source scripts/lib/gpu-common.sh
gpu_setup
here=bench/results/pipeline-h200-2026-11-28
step integration suites on the cuda engine
LD_LIBRARY_PATH=$R GPUSCAN_TEST_ENGINE=cuda timeout 240 $B/integration_tests --gtest_brief=1 2>&1 | grep -v '\[info\]' \
  | tee "$out/integration_cuda_merged.txt" | tail -4
step Put and Get through shared and device memory, 1 GiB int32
mkdir -p /dev/shm/gpuscan-bench
gpu_server pg 127.0.0.1:50896 --engine cuda --resident-bytes $((8 << 30)) --shm-dir /dev/shm/gpuscan-bench --allow-device-ipc
PYTHONPATH=$P PYTHONDONTWRITEBYTECODE=1 timeout 200 python3 $here/put_get_bench.py 127.0.0.1:50896 /dev/shm/gpuscan-bench \
  $((1 << 28)) "$out/put_get.json"
gpu_stop pg
bash bench/results/resident-scale-h200-2026-11-28/run.sh
exit 0
