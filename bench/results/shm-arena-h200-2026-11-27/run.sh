#!/usr/bin/env bash
# Issue 45 check (scratch driver, carried in .gpu-pack): engine tests, shm integration on cuda, e2e shm benches, PCIe ceiling, Python arena rows.
set -uo pipefail
out=${OUT:-/tmp/o}; mkdir -p "$out"
[ -d .gpu-bin ] || tar -xJf .gpu-pack/gpu.tar.xz
B=$PWD/.gpu-bin
nvidia-smi -L | tee "$out/device.txt"
export LD_LIBRARY_PATH=$PWD/.gpu-rt
echo "=== gpu_engine_tests"
timeout 200 $B/gpu_engine_tests --gtest_brief=1 --gtest_filter='-StickyFault*:DeviceDrain*' 2>&1 | grep -v "\[info\]" | tail -4
echo "=== shm on cuda"
GPUSCAN_TEST_ENGINE=cuda timeout 200 $B/integration_tests --gtest_brief=1 --gtest_filter='SharedMemory*:*Shm*' 2>&1 | grep -v "\[info\]" | tail -4
timeout 60 $B/shm_region_test --gtest_brief=1 2>&1 | tail -2
mkdir -p /dev/shm/gs
$B/gpuscan-server --address 127.0.0.1:50579 --engine cuda --shm-dir /dev/shm/gs >"$out/server.log" 2>&1 &
for _ in $(seq 100); do $B/gpuscan health -s 127.0.0.1:50579 >/dev/null 2>&1 && break; sleep 0.2; done
for op in scan reduce compact; do
  echo "=== e2e shm $op"
  timeout 120 $B/gpuscan -s 127.0.0.1:50579 bench --e2e --op $op --dtype int32 --bytes $((1<<30)) --shm --concurrency 1 --requests 10 --json "$out/shm_$op.json" >"$out/shm_$op.txt" 2>&1
  tail -4 "$out/shm_$op.txt"
done
echo "=== python arena"
unset LD_LIBRARY_PATH
PYTHONPATH=$PWD/.gpu-py/pkg timeout 200 python3 -m gpuscan.bench --target 127.0.0.1:50579 --size 1GiB --peer off --repeat 5 --json "$out/py_bench.json" 2>&1 | tail -14
export LD_LIBRARY_PATH=$PWD/.gpu-rt
echo "=== pcie ceiling (probe)"
timeout 150 $B/pcie 2>&1 | grep -E "register|whole|x 2 slots|x 4 slots" | head -24
kill %1 2>/dev/null

