#!/usr/bin/env bash
# ON the GPU machine (carry .gpu-pack: gpuscan-server of an experiment build, gpuscan): how many
# chunks a call may buffer (StreamingCall::kMaxBuffered, 3; the experiment build reads
# GPUSCAN_MAX_BUFFERED) against one stream's share of the echo ceiling: three servers side by
# side, 1 GiB int32 scan, one stream and 8 lanes checked, rounds alternating.
source scripts/lib/gpu-common.sh && GPU_LOGS_TGZ=buffered-logs.tgz gpu_setup
export LD_LIBRARY_PATH=$R
pids=()
for m in 3 6 12; do
  GPUSCAN_MAX_BUFFERED=$m $B/gpuscan-server --address 127.0.0.1:$((50700 + m)) --engine cuda >"$out/server_$m.log" 2>&1 &
  pids+=($!)
done
for m in 3 6 12; do
  for _ in $(seq 100); do $B/gpuscan health -s 127.0.0.1:$((50700 + m)) >/dev/null 2>&1 && break; sleep 0.2; done
done
for round in 1 2 3 4; do
  for spec in "--lanes 1" "--lanes 8 --check"; do
    for m in 3 6 12; do
      f="$out/r${round}_m${m}_$(echo "$spec" | tr -d ' -')"
      # shellcheck disable=SC2086
      timeout 100 $B/gpuscan -s 127.0.0.1:$((50700 + m)) bench --e2e --op scan --dtype int32 --bytes $((1 << 30)) $spec \
        --concurrency 1 --requests 3 --json "$f.json" >"$f.txt" 2>&1
      printf "round %s buffered %-2s %-18s " "$round" "$m" "$spec"
      grep -E "^ +1 " "$f.txt" | awk '{print "GB/s", $3, "ceiling", $(NF-1), "share", $NF}'
      grep -iE "error|wrong" "$f.txt" | head -2
    done
  done
done
kill -TERM "${pids[@]}"; wait
