#!/usr/bin/env bash
# ON the GPU machine (carry .gpu-pack: gpuscan, gpuscan-server + libraries): issue 11's small-call
# cell (a 1024-element call at concurrency 1, p50 against the Transport ceiling's p50 in the same
# run) on a cuda server and a cpu server of the same build on the same host, ROUNDS rounds.
source scripts/lib/gpu-common.sh && gpu_setup >/dev/null
export LD_LIBRARY_PATH=$R
$B/gpuscan-server --address 127.0.0.1:50561 --engine cuda --log-level warn >"$out/server_cuda.log" 2>&1 &
$B/gpuscan-server --address 127.0.0.1:50562 --engine cpu --log-level warn >"$out/server_cpu.log" 2>&1 &
sleep 3
for r in $(seq 1 ${ROUNDS:-3}); do
  for e in cuda:50561 cpu:50562; do
    for c in "scan int32" "scan float32" "reduce int32" "compact int32"; do
      set -- $c
      f="$out/${e%%:*}_$1_$2_r$r.json"
      timeout 60 $B/gpuscan -s 127.0.0.1:${e##*:} bench --e2e --op $1 --dtype $2 --elements 1024 --concurrency 1 \
        --duration 3 --json "$f" >/dev/null 2>&1
      python3 -c "
import json,sys; d=json.load(open('$f')); l=d['levels'][0]; s=l['stages_us']
print('r$r ${e%%:*} $1 $2 p50 %.3f ceil %.3f ratio %.2f | receive %.0f total %.0f kernel %.0f' % (l['latency_ms']['p50'], l['ceiling']['latency_ms']['p50'], l['latency_ms']['p50']/l['ceiling']['latency_ms']['p50'], s['receive'], s['total'], s['kernel']))"
    done
  done
done
kill %1 %2
