#!/usr/bin/env bash
# Runs ON the GPU machine (device `run`, repo root): the raw Scan path of issue 10 part 3 (one copy
# of a chunk on the server: gathered from gRPC's slices into a registered payload block, scanned in
# place, sent back by reference), measured A/B against the server before it in the same run.
#   carry: .gpu-wire (wire.tar.xz: .gpu-bin/{integration_tests,gpuscan-server,gpuscan}, .gpu-rt,
#   .gpu-old/gpuscan-server built from the commit before; made by the commands in bench/NOTES.md)
#   run(command="bash scripts/gpu-wire.sh", carry=[".gpu-wire"], timeout_s=590)
# WIRE_STEPS picks steps (default all): tests,ab,cli. Logs in $OUT/wire-logs.tgz and console.txt.
set -uo pipefail
final=${OUT:-/tmp/gpuscan-out}
out=$(mktemp -d)
mkdir -p "$final"
trap 'tar -czf "$final/wire-logs.tgz" -C "$out" .' EXIT
[ -d .gpu-bin ] || xz -dc .gpu-wire/wire.tar.xz | tar -xf -
export LD_LIBRARY_PATH=$PWD/.gpu-rt
B=$PWD/.gpu-bin
step() { echo; echo "=== $* ==="; }
want() { [[ ",${WIRE_STEPS:-tests,ab,cli}," == *",$1,"* ]]; }
nvidia-smi -L | tee "$out/device.txt"

if want tests; then
  step integration tests on the cuda engine
  GPUSCAN_TEST_ENGINE=cuda timeout 300 $B/integration_tests --gtest_brief=1 2>&1 | grep -v '\[info\]' \
    >"$out/integration_cuda.log"
  grep -E "PASSED|FAILED|tests ran|SKIPPED" "$out/integration_cuda.log" | head -20
fi

# start NAME BINARY PORT [flags...]: a cuda server, waited for.
start() {
  local name=$1 bin=$2 port=$3
  shift 3
  $bin --address 127.0.0.1:$port --engine cuda "$@" >"$out/server_$name.log" 2>&1 &
  echo $! >"$out/pid_$name"
  for _ in $(seq 100); do $B/gpuscan health -s 127.0.0.1:$port >/dev/null 2>&1 && return; sleep 0.2; done
  echo "server $name did not start"
}
stop() { kill -TERM "$(cat "$out/pid_$1")"; wait "$(cat "$out/pid_$1")" 2>/dev/null; }

if want ab || want cli; then
  start old .gpu-old/gpuscan-server 50601
  start new $B/gpuscan-server 50602
  start heap $B/gpuscan-server 50603 --payload-pool-bytes 0
fi

if want ab; then
  step "1 GiB int32 scan: old (protobuf strings) vs new (raw, pooled) vs new without the pool, same run"
  for round in 1 2; do
    for spec in "1 --check" "8 --check" "8" "4"; do
      set -- $spec
      for srv in old:50601 new:50602 heap:50603; do
        name=${srv%%:*} port=${srv##*:}
        f="$out/ab_${name}_k$1${2:+_check}_r$round"
        timeout 100 $B/gpuscan -s 127.0.0.1:$port bench --e2e --op scan --dtype int32 --bytes $((1 << 30)) \
          --lanes $1 ${2:-} --concurrency 1 --requests 3 --json "$f.json" >"$f.txt" 2>&1
        printf "round %s lanes %-2s %-8s %-5s " "$round" "$1" "${2:-}" "$name"
        grep -E "^ +1 " "$f.txt" | awk '{print "GB/s", $3, "ceiling", $(NF-1), "share", $NF}'
      done
    done
  done
  step "reduce, 1 GiB int32, one stream (Reduce is still protobuf on both: a control)"
  for srv in old:50601 new:50602; do
    name=${srv%%:*} port=${srv##*:}
    timeout 100 $B/gpuscan -s 127.0.0.1:$port bench --e2e --op reduce --dtype int32 --bytes $((1 << 30)) \
      --concurrency 1 --requests 3 >"$out/reduce_$name.txt" 2>&1
    printf "%-5s " "$name"; grep -E "^ +1 " "$out/reduce_$name.txt" | awk '{print "GB/s", $3, "ceiling", $(NF-1)}'
  done
fi

if want cli; then
  step "CLI file to file, 1 GiB int32 (one call and --lanes 8), old vs new, three rounds"
  head -c $((1 << 30)) /dev/urandom >/tmp/in.bin
  for round in 1 2 3; do
  for srv in old:50601 new:50602; do
    name=${srv%%:*} port=${srv##*:}
    for k in 1 8; do
      /usr/bin/time -f "$name lanes $k: wall %e s" $B/gpuscan -s 127.0.0.1:$port scan --format raw --dtype int32 \
        -i /tmp/in.bin -o /tmp/out_${name}_$k.bin --lanes $k --no-progress 2>&1 | tail -1
    done
  done
  done
  cmp /tmp/out_old_1.bin /tmp/out_new_1.bin && cmp /tmp/out_new_1.bin /tmp/out_new_8.bin && echo "outputs identical"
  rm -f /tmp/in.bin /tmp/out_*.bin
fi

if want ab || want cli; then
  grep -h "payload\|error" "$out"/server_new.log | head -5
  stop old; stop new; stop heap
fi
