#!/usr/bin/env bash
# Runs ON the GPU machine after scripts/gpu-check.sh: where a striped array's time goes. Starts
# the CUDA server at --log-level debug (the lane join logs how long its driver was busy per
# array) and scans 1 GiB int32 at several lane counts; prints the bench rows and the join lines.
#   run(command="bash scripts/diag-lanes.sh", carry=[".gpu-pack"])
set -u
out=${OUT:-/tmp/gpuscan-out}; mkdir -p "$out"
[ -d .gpu-bin ] || tar -xJf .gpu-pack/gpu.tar.xz
export LD_LIBRARY_PATH=$PWD/.gpu-rt
B=.gpu-bin
$B/gpuscan-server --address 127.0.0.1:50571 --engine cuda --log-level debug >/tmp/server.log 2>&1 &
for _ in $(seq 100); do $B/gpuscan health -s 127.0.0.1:50571 >/dev/null 2>&1 && break; sleep 0.2; done
for spec in ${DIAG:-scan:1 scan:4 scan:8 scan:16 reduce:8}; do
  op=${spec%:*} k=${spec#*:}
  echo "--- $op --lanes $k"
  timeout 60 $B/gpuscan -s 127.0.0.1:50571 bench --e2e --op "$op" --dtype int32 --bytes $((1 << 30)) --lanes "$k" \
    --concurrency 1 --requests 3 2>&1 | grep -E "^ +1 |rror"
  grep -a "lanes array" /tmp/server.log | tail -3 | sed 's/.*lanes array [0-9a-f]*: //'
  : >/tmp/server.log
done
kill %1; wait
