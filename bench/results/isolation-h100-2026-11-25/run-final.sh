#!/usr/bin/env bash
set -uo pipefail
out=${OUT:-/tmp/out}; mkdir -p "$out"
cd .exp/iso
[ -d bin ] || xz -dc pack.tar.xz | tar -xf -
export LD_LIBRARY_PATH=$PWD/rt
B=$PWD/bin
{
echo "=== DeviceDrain"
GPUSCAN_BIN_DIR=$B timeout 300 $B/gpu_engine_tests --gtest_filter='DeviceDrain*' 2>&1 | grep -E "OK|FAILED|PASSED|SKIPPED \]" | head -6
echo "=== isolation_tests"
GPUSCAN_BIN_DIR=$B timeout 120 $B/isolation_tests --gtest_brief=1 2>&1 | tail -2
cd ../..
for i in 1 2 3; do
echo "=== test_lanes.py through a front, round $i"
GPUSCAN_ISOLATE_DEVICES=on GPUSCAN_DEVICES=0 GPUSCAN_TEST_ENGINE=cuda GPUSCAN_SERVER=$B/gpuscan-server \
  PYTHONPATH=$PWD/.exp/iso/pkg timeout 200 python3 -m pytest -q python/tests/test_lanes.py 2>&1 | grep -E "^E |passed|failed" | head -8
done
echo "=== all Python suites through fronts (cuda)"
GPUSCAN_ISOLATE_DEVICES=on GPUSCAN_DEVICES=0 GPUSCAN_TEST_ENGINE=cuda GPUSCAN_SERVER=$B/gpuscan-server \
  PYTHONPATH=$PWD/.exp/iso/pkg timeout 400 python3 -m pytest -q python/tests 2>&1 | grep -E "^FAILED|^ERROR|passed|failed" | head -12
} 2>&1 | tee "$out/iso4.log"
