#!/usr/bin/env bash
# ON the GPU machine (carry .gpu-pack): where one stream's CPU goes. The image has no perf or
# nsys, so this reads /proc: each thread's CPU time (utime + stime) in the server and the client
# over 2 s in the middle of 1 GiB int32 scans at concurrency 1 (one stream, and 8 lanes checked),
# printed as the busiest threads' share of one core.
source scripts/lib/gpu-common.sh && GPU_LOGS_TGZ=threads-logs.tgz gpu_setup
export LD_LIBRARY_PATH=$R
port=50651
$B/gpuscan-server --address 127.0.0.1:$port --engine cuda >"$out/server.log" 2>&1 &
spid=$!
for _ in $(seq 100); do $B/gpuscan health -s 127.0.0.1:$port >/dev/null 2>&1 && break; sleep 0.2; done
snap() {  # pid -> "tid comm ticks" lines
  for t in /proc/$1/task/*; do
    local comm ticks
    [ -e "$t/comm" ] || continue
    comm=$(tr ' ' '_' <"$t/comm" 2>/dev/null) || continue
    ticks=$(sed 's/.*) //' "$t/stat" 2>/dev/null | awk '{print $12 + $13}') || continue
    echo "${t##*/} $comm $ticks"
  done
}
hz=$(getconf CLK_TCK)
for spec in "--lanes 1 --requests 12" "--lanes 8 --check --requests 40"; do
  step "$spec"
  $B/gpuscan -s 127.0.0.1:$port bench --e2e --op scan --dtype int32 --bytes $((1 << 30)) $spec --concurrency 1 \
    --json "$out/bench_$(echo "$spec" | tr -d ' -').json" >"$out/bench_$(echo "$spec" | tr -d ' -').txt" 2>&1 &
  cpid=$!
  sleep 4  # the client has made its input (1 GiB random, its expected scan) and is sending
  snap $spid >"$out/s0"; snap $cpid >"$out/c0"; t0=$(date +%s.%N)
  sleep 2
  snap $spid >"$out/s1"; snap $cpid >"$out/c1"; t1=$(date +%s.%N)
  wait $cpid
  grep -E "^ +1 " "$out/bench_$(echo "$spec" | tr -d ' -').txt"
  for side in s c; do
    name=server; [ $side = c ] && name=client
    echo "$name threads, % of one core:"
    join <(sort "$out/${side}0") <(sort "$out/${side}1") 2>/dev/null |
      awk -v hz=$hz -v t0="$t0" -v t1="$t1" '{ d = $5 - $3; if (d > 0) printf "  %-6s %-16s %5.1f%%\n", $1, $2, 100 * d / hz / (t1 - t0) }' |
      sort -k3 -rn | head -10
  done
done
kill -TERM $spid; wait $spid
