#!/usr/bin/env bash
# Issue 11's small-call cell (1024 elements, concurrency 1, p50 against the Transport ceiling's p50
# in the same run) on the build under test and the commit before it (73c8bd7), servers alternating,
# ROUNDS rounds, after the integration suites on the cuda engine. Made inline-and-writes-h100,
# inline2-h100 (ROUNDS=4) and final-h100 (ROUNDS=4: the committed build; README.md says which
# build each folder measured).
#   here:    scripts/gpu pack --targets "gpuscan gpuscan-server integration_tests" --extra gpuscan-server-old=OLD_BUILD/bin/gpuscan-server
#   device:  run(command="ROUNDS=4 bash bench/results/small-calls-2026-11-26/run.sh", carry=[".gpu-pack"], kind="nvidia-h100-x1", timeout_s=590)
# Under $OUT: device.txt, integration_cuda.txt, {old,new}_<op>_<dtype>_r<round>.json, server logs.
source scripts/lib/gpu-common.sh
gpu_setup >/dev/null
export LD_LIBRARY_PATH=$R
step integration tests, cuda engine
GPUSCAN_TEST_ENGINE=cuda timeout 400 $B/integration_tests --gtest_brief=1 >"$out/integration_cuda.txt" 2>&1
echo "rc $?"; grep -E "PASSED|FAILED|SKIPPED" "$out/integration_cuda.txt" | head -20
$B/gpuscan-server-old --address 127.0.0.1:50571 --engine cuda --log-level warn >"$out/server_old.log" 2>&1 &
$B/gpuscan-server --address 127.0.0.1:50572 --engine cuda --log-level warn >"$out/server_new.log" 2>&1 &
sleep 3
for r in $(seq 1 ${ROUNDS:-3}); do
  for v in old:50571 new:50572; do
    for c in "scan int32" "scan float32" "reduce int32" "compact int32"; do
      set -- $c
      f="$out/${v%%:*}_$1_$2_r$r.json"
      timeout 60 $B/gpuscan -s 127.0.0.1:${v##*:} bench --e2e --op $1 --dtype $2 --elements 1024 --concurrency 1 \
        --duration 3 --json "$f" >/dev/null 2>&1
      python3 -c "
import json; d=json.load(open('$f')); l=d['levels'][0]; s=l['stages_us']
print('r$r ${v%%:*} $1 $2 p50 %.3f ceil %.3f ratio %.2f | receive %.0f total %.0f kernel %.0f' % (l['latency_ms']['p50'], l['ceiling']['latency_ms']['p50'], l['latency_ms']['p50']/l['ceiling']['latency_ms']['p50'], s['receive'], s['total'], s['kernel']))"
    done
  done
done
kill %1 %2
