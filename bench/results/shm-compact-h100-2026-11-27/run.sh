#!/usr/bin/env bash
# Issue 45, second round: the pipelined compaction and the pcie ceiling rows. The engine tests, the
# whole integration suite on the cuda engine, `bench --e2e --shm` scan/reduce/compact of 1 GiB
# int32, the streamed compaction at 1 and 8 lanes (checked), the Python arena rows.
#   here:    scripts/gpu pack --python
#   device:  run(command="bash bench/results/shm-compact-h100-2026-11-27/run.sh", carry=[".gpu-pack"], kind="nvidia-h100-x1", timeout_s=590)
# Under $OUT: device.txt, integration_cuda.log, shm_{scan,reduce,compact}.{log,json},
# compact_{stream,lanes8}.{log,json}, py_bench.{log,json}, server.log.
source scripts/lib/gpu-common.sh
gpu_setup
export LD_LIBRARY_PATH=$R
echo "=== gpu_engine_tests"
timeout 200 $B/gpu_engine_tests --gtest_brief=1 --gtest_filter='-StickyFault*:DeviceDrain*' 2>&1 | grep -v "\[info\]" | tail -3
echo "=== integration on cuda (all)"
GPUSCAN_TEST_ENGINE=cuda timeout 400 $B/integration_tests --gtest_brief=1 > "$out/integration_cuda.log" 2>&1
grep -E "FAILED|PASSED|SKIPPED|tests ran" "$out/integration_cuda.log" | grep -v "^\[  FAILED  \].*, where" | tail -8
mkdir -p /dev/shm/gs
$B/gpuscan-server --address 127.0.0.1:50579 --engine cuda --shm-dir /dev/shm/gs >"$out/server.log" 2>&1 &
for _ in $(seq 100); do $B/gpuscan health -s 127.0.0.1:50579 >/dev/null 2>&1 && break; sleep 0.2; done
for op in scan reduce compact; do
  echo "=== e2e shm $op"
  timeout 120 $B/gpuscan -s 127.0.0.1:50579 bench --e2e --op $op --dtype int32 --bytes $((1<<30)) --shm --concurrency 1 --requests 10 --json "$out/shm_$op.json" >"$out/shm_$op.log" 2>&1
  tail -3 "$out/shm_$op.log"
done
echo "=== e2e compact streamed, 1 stream and 8 lanes (checked)"
timeout 120 $B/gpuscan -s 127.0.0.1:50579 bench --e2e --op compact --dtype int32 --bytes $((1<<30)) --concurrency 1 --requests 5 --check --json "$out/compact_stream.json" >"$out/compact_stream.log" 2>&1; tail -2 "$out/compact_stream.log"
timeout 120 $B/gpuscan -s 127.0.0.1:50579 bench --e2e --op compact --dtype int32 --bytes $((1<<30)) --concurrency 1 --requests 5 --lanes 8 --check --json "$out/compact_lanes8.json" >"$out/compact_lanes8.log" 2>&1; tail -2 "$out/compact_lanes8.log"
echo "=== python arena"
unset LD_LIBRARY_PATH
PYTHONPATH=$P timeout 200 python3 -m gpuscan.bench --target 127.0.0.1:50579 --size 1GiB --peer off --repeat 5 --json "$out/py_bench.json" > "$out/py_bench.log" 2>&1; tail -11 "$out/py_bench.log"
kill %1 2>/dev/null
true
