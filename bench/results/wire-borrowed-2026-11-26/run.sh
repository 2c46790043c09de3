#!/usr/bin/env bash
# ON the GPU machine (carry .gpu-pack: gpuscan-server, gpuscan and their libraries): one stream
# and 8 lanes of a 1 GiB int32 scan with the client sending the array from where it lies
# (borrowed slices) against --plain-io (a Source copied into each message, as every call did
# before), each beside its ceiling in the same run (the input in place / a pattern copied).
# ROUNDS rounds, the specs alternating; REQUESTS calls a row.
source scripts/lib/gpu-common.sh && gpu_setup >/dev/null
export LD_LIBRARY_PATH=$R
port=50641
$B/gpuscan-server --address 127.0.0.1:$port --engine cuda >"$out/server.log" 2>&1 &
spid=$!
for _ in $(seq 100); do $B/gpuscan health -s 127.0.0.1:$port >/dev/null 2>&1 && break; sleep 0.2; done
specs=${SPECS:-"--lanes 1;--lanes 1 --plain-io;--lanes 1 --check;--lanes 8 --check;--lanes 8 --check --plain-io"}
IFS=';' read -ra list <<<"$specs"
for round in $(seq 1 ${ROUNDS:-4}); do
  for spec in "${list[@]}"; do
    f="$out/scan_r${round}_$(echo "$spec" | tr -d ' -')"
    # shellcheck disable=SC2086
    timeout 120 $B/gpuscan -s 127.0.0.1:$port bench --e2e --op scan --dtype int32 --bytes $((1 << 30)) $spec \
      --concurrency 1 --requests ${REQUESTS:-5} --json "$f.json" >"$f.txt" 2>&1
    printf "round %s %-28s " "$round" "$spec"
    grep -E "^ +1 " "$f.txt" | awk '{print "GB/s", $3, "p50", $4, "ceiling", $(NF-1), "share", $NF}'
    grep -iE "error|wrong|differs" "$f.txt" | head -2
  done
done
kill -TERM $spid; wait
