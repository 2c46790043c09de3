#!/usr/bin/env bash
# Issue 45 on an H200 host: the engine tests, shared memory on the cuda engine (integration and
# shm_region_test), CLI `bench --e2e --shm` scan/reduce/compact of 1 GiB int32, the Python arena
# rows, and the PCIe ceiling (the pcie probe, pcie.cu: its ring shapes).
#   here:    scripts/gpu pack --targets "gpu_engine_tests integration_tests shm_region_test gpuscan-server gpuscan" --python --extra pcie=PCIE
#            (PCIE: nvcc -O2 -o PCIE bench/results/shm-arena-h200-2026-11-27/pcie.cu)
#   device:  run(command="bash bench/results/shm-arena-h200-2026-11-27/run.sh", carry=[".gpu-pack"], kind="nvidia-h200", timeout_s=590)
# Under $OUT: device.txt, shm_{scan,reduce,compact}.{txt,json}, py_bench.json, server_shm.log.
source scripts/lib/gpu-common.sh
gpu_setup
export LD_LIBRARY_PATH=$R
step gpu_engine_tests
timeout 200 "$B/gpu_engine_tests" --gtest_brief=1 --gtest_filter='-StickyFault*:DeviceDrain*' 2>&1 | grep -v "\[info\]" | tail -4
step shm on cuda
GPUSCAN_TEST_ENGINE=cuda timeout 200 "$B/integration_tests" --gtest_brief=1 --gtest_filter='SharedMemory*:*Shm*' 2>&1 \
  | grep -v "\[info\]" | tail -4
timeout 60 "$B/shm_region_test" --gtest_brief=1 2>&1 | tail -2
mkdir -p /dev/shm/gs
gpu_server shm 127.0.0.1:50579 --engine cuda --shm-dir /dev/shm/gs || exit 1
for op in scan reduce compact; do
  step e2e shm $op
  timeout 120 "$B/gpuscan" -s 127.0.0.1:50579 bench --e2e --op $op --dtype int32 --bytes $((1 << 30)) --shm \
    --concurrency 1 --requests 10 --json "$out/shm_$op.json" >"$out/shm_$op.txt" 2>&1
  tail -4 "$out/shm_$op.txt"
done
step python arena
PYTHONPATH=$P LD_LIBRARY_PATH='' timeout 200 python3 -m gpuscan.bench --target 127.0.0.1:50579 --size 1GiB --peer off \
  --repeat 5 --json "$out/py_bench.json" 2>&1 | tail -14
step "pcie ceiling (probe)"
timeout 150 "$B/pcie" 2>&1 | grep -E "register|whole|x 2 slots|x 4 slots" | head -24
