#!/usr/bin/env bash
# ON the GPU machine: isolation checks (issue 14) and the front's price, one run.
set -uo pipefail
out=${OUT:-/tmp/out}; mkdir -p "$out"
cd .exp/iso
[ -d bin ] || xz -dc pack.tar.xz | tar -xf -
export LD_LIBRARY_PATH=$PWD/rt
B=$PWD/bin
nvidia-smi -L | tee "$out/device.txt"
log="$out/iso.log"
{
echo "=== DeviceDrain (front with fault workers)"
GPUSCAN_BIN_DIR=$B timeout 300 $B/gpu_engine_tests --gtest_filter='DeviceDrain*' 2>&1 | grep -v '\[info\]' | tail -25
echo "=== isolation_tests (cpu engine) on this host"
GPUSCAN_BIN_DIR=$B timeout 120 $B/isolation_tests --gtest_brief=1 2>&1 | tail -5
echo "=== Python suites against a front (GPUSCAN_ISOLATE_DEVICES=on, cuda)"
( cd ../.. && GPUSCAN_ISOLATE_DEVICES=on GPUSCAN_TEST_ENGINE=cuda GPUSCAN_SERVER=$B/gpuscan-server PYTHONPATH=$PWD/.exp/iso/pkg \
  timeout 300 python3 -m pytest -q python/tests 2>&1 | tail -6 )
echo "=== the front's price: 1 GiB int32 scan, front vs plain, same run"
for mode in off on off on; do
  GPUSCAN_ISOLATE_DEVICES=$mode $B/gpuscan-server --address 127.0.0.1:50600 --engine cuda --log-level warn > "$out/srv_$mode.log" 2>&1 &
  pid=$!
  for _ in $(seq 100); do $B/gpuscan health -s 127.0.0.1:50600 >/dev/null 2>&1 && break; sleep 0.2; done
  G="$B/gpuscan -s 127.0.0.1:50600"
  echo "--- isolate $mode: one stream"
  timeout 100 $G bench --e2e --op scan --dtype int32 --bytes $((1 << 30)) --concurrency 1 --requests 3 --check 2>&1 | tail -3
  echo "--- isolate $mode: 8 lanes"
  timeout 100 $G bench --e2e --op scan --dtype int32 --bytes $((1 << 30)) --concurrency 1 --requests 3 --lanes 8 --check 2>&1 | tail -3
  echo "--- isolate $mode: 1024 elements, concurrency 1 and 16"
  timeout 60 $G bench --e2e --op scan --dtype int32 --elements 1024 --concurrency 1,16 --duration 2 2>&1 | tail -5
  kill -TERM $pid; wait $pid; echo "server exit $?"
done
} 2>&1 | tee "$log"
