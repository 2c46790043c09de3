#!/usr/bin/env bash
# ON the GPU machine (carry .gpu-pack: gpuscan-server, gpuscan and their libraries): every
# transport mode of a 1 GiB int32 call in one run, each beside its own ceiling: one stream
# (the array in place, and copied with --plain-io), 8 lanes, shared memory (the ceiling: the host
# copying, or for reduce reading, the same bytes on 8 threads). ROUNDS rounds, alternating; the
# JSON feeds bench/plot_transport_modes.py.
source scripts/lib/gpu-common.sh && gpu_setup >/dev/null
export LD_LIBRARY_PATH=$R
port=50661
mkdir -p /dev/shm/gpuscan-shm
$B/gpuscan-server --address 127.0.0.1:$port --engine cuda --shm-dir /dev/shm/gpuscan-shm >"$out/server.log" 2>&1 &
spid=$!
for _ in $(seq 100); do $B/gpuscan health -s 127.0.0.1:$port >/dev/null 2>&1 && break; sleep 0.2; done
specs=${SPECS:-"--op scan --lanes 1;--op scan --lanes 1 --plain-io;--op scan --lanes 8 --check;--op scan --lanes 8;--op scan --shm --check;--op scan --shm;--op reduce --lanes 1;--op reduce --lanes 8;--op reduce --shm"}
IFS=';' read -ra list <<<"$specs"
for round in $(seq 1 ${ROUNDS:-3}); do
  for spec in "${list[@]}"; do
    f="$out/modes_r${round}_$(echo "$spec" | tr -d ' -')"
    # shellcheck disable=SC2086
    timeout 120 $B/gpuscan -s 127.0.0.1:$port bench --e2e --dtype int32 --bytes $((1 << 30)) $spec \
      --concurrency 1 --requests ${REQUESTS:-5} --json "$f.json" >"$f.txt" 2>&1
    printf "round %s %-30s " "$round" "$spec"
    grep -E "^ +1 " "$f.txt" | awk '{print "GB/s", $3, "p50", $4, "ceiling", $(NF-1), "share", $NF}'
    grep -iE "error|wrong|differs" "$f.txt" | head -2
  done
done
kill -TERM $spid; wait
rm -rf /dev/shm/gpuscan-shm
