# scripts/gpu run exit: how long a CUDA server takes from SIGTERM to its process's end
# (RELIABILITY.md, Known defects: it was 7.9-9.4 s, bench/results/exit-h200-2026-11-29), beside its
# own log's "received SIGTERM", "shutdown complete" and "exiting". Four cases: idle; after 256 MiB
# scans; under a load of them; idle with resident arrays after two scans.
# Logs: exit.txt, server_<case>.log. (pack --targets "gpuscan-server gpuscan")
source scripts/lib/gpu-common.sh
gpu_setup
export LD_LIBRARY_PATH=$R
G() { "$B/gpuscan" "$@"; }
# stop_timed NAME: SIGTERM, then the seconds until the process ends, and the log's teardown lines
stop_timed() {
  local pid=${gpu_pids[$1]} t1 t2 rc
  t1=$(date +%s.%N)
  kill -TERM "$pid"
  wait "$pid" 2>/dev/null; rc=$?
  t2=$(date +%s.%N)
  unset "gpu_pids[$1]"
  awk -v a="$t1" -v b="$t2" -v rc="$rc" -v n="$1" 'BEGIN {printf "%s: exit %d, %.3f s after SIGTERM\n", n, rc, b - a}'
  grep -E "received SIGTERM|shutdown complete|exiting" "$out/server_$1.log" | cut -c1-160
}
{
  step idle
  gpu_server idle 127.0.0.1:50071 --engine cuda
  sleep 2
  stop_timed idle
  step "after 256 MiB scans"
  gpu_server used 127.0.0.1:50072 --engine cuda
  G -s 127.0.0.1:50072 bench --e2e --op scan --dtype int32 --bytes $((256 << 20)) --concurrency 1,4 --requests 8 >/dev/null 2>&1
  stop_timed used
  step "under load"
  gpu_server load 127.0.0.1:50073 --engine cuda
  (G -s 127.0.0.1:50073 --retries 0 bench --e2e --op scan --dtype int32 --bytes $((256 << 20)) --concurrency 4 \
     --duration 20 >/dev/null 2>&1 &)
  sleep 3
  stop_timed load
  step "idle, resident arrays on (--resident-bytes 8 GiB)"
  gpu_server resident 127.0.0.1:50074 --engine cuda --resident-bytes $((8 << 30))
  G -s 127.0.0.1:50074 bench --e2e --op scan --dtype int32 --bytes $((256 << 20)) --concurrency 1 --requests 2 >/dev/null 2>&1
  stop_timed resident
} 2>&1 | tee "$out/exit.txt"
